#include "engine/kernels/cpu/cpu_features.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/strings.h"
#include "engine/kernels/cpu/isa_paths.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace quiver::engine::cpu {
namespace {

#if defined(__x86_64__)
bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

uint64_t Xgetbv() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures Read() {
  CpuFeatures f;
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const uint32_t max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.vendor = vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  const bool osxsave = Bit(c, 27);
  const uint64_t xcr0 = osxsave ? Xgetbv() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE and AVX state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  f.fma = ymm && Bit(c, 12);
  f.f16c = ymm && Bit(c, 29);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = ymm && Bit(b, 5);
    f.avx512f = zmm && Bit(b, 16);
    f.avx512dq = zmm && Bit(b, 17);
    f.avx512bw = zmm && Bit(b, 30);
    f.avx512vl = zmm && Bit(b, 31);
    f.avx512_vnni = zmm && Bit(c, 11);
    f.amx_bf16 = tiles && Bit(d, 22);
    f.amx_tile = tiles && Bit(d, 24);
    f.amx_int8 = tiles && Bit(d, 25);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx_vnni = ymm && Bit(a, 4);
    f.avx512_bf16 = zmm && Bit(a, 5);
  }
  __get_cpuid(0x80000000, &a, &b, &c, &d);
  if (a >= 0x80000004) {
    char brand[49] = {};
    for (size_t leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002 + static_cast<uint32_t>(leaf), &a, &b, &c, &d);
      std::memcpy(brand + 16 * leaf, &a, 4);
      std::memcpy(brand + 16 * leaf + 4, &b, 4);
      std::memcpy(brand + 16 * leaf + 8, &c, 4);
      std::memcpy(brand + 16 * leaf + 12, &d, 4);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(f.brand.begin());
  }
  return f;
}
#else
CpuFeatures Read() { return {}; }
#endif

}  // namespace

std::string CpuFeatures::Flags() const {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (on) out += StrCat(out.empty() ? "" : " ", name);
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_vnni, "avx512_vnni");
  add(avx_vnni, "avx_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(amx_tile, "amx_tile");
  add(amx_int8, "amx_int8");
  add(amx_bf16, "amx_bf16");
  return out;
}

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures kFeatures = Read();
  return kFeatures;
}

const char* CpuPathName(CpuPath path) {
  switch (path) {
    case CpuPath::kGeneric:
      return "generic";
    case CpuPath::kAvx2:
      return "avx2";
    case CpuPath::kAvx2Vnni:
      return "avx2_vnni";
    case CpuPath::kAvx512:
      return "avx512";
    case CpuPath::kAvx512Vnni:
      return "avx512_vnni";
    case CpuPath::kAmx:
      return "amx";
  }
  return "?";
}

namespace {

// Linux keeps the AMX tile data out of a process's saved state until the process asks for it.
bool RequestAmxState() {
#if defined(__x86_64__) && defined(__linux__)
  // ARCH_REQ_XCOMP_PERM (asm/prctl.h) and XFEATURE_XTILEDATA, as the longs syscall takes.
  constexpr long kArchReqXcompPerm = 0x1023;  // NOLINT(google-runtime-int)
  constexpr long kXfeatureXtiledata = 18;     // NOLINT(google-runtime-int)
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

std::vector<CpuPath> ReadSupported() {
  std::vector<CpuPath> paths;
#if defined(__AVX2__) && defined(__FMA__)
  const CpuFeatures& f = HostCpuFeatures();
  if (!(f.avx2 && f.fma)) return paths;  // the build cannot run here at all (Engine::Load says)
  paths.push_back(CpuPath::kAvx2);
  if (f.avx_vnni) paths.push_back(CpuPath::kAvx2Vnni);
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return paths;
  paths.push_back(CpuPath::kAvx512);
  if (!f.avx512_vnni) return paths;
  paths.push_back(CpuPath::kAvx512Vnni);
  if (f.amx_tile && f.amx_int8 && RequestAmxState()) paths.push_back(CpuPath::kAmx);
#else
  paths.push_back(CpuPath::kGeneric);
#endif
  return paths;
}

std::string Names(const std::vector<CpuPath>& paths) {
  std::string out;
  for (CpuPath p : paths) out += StrCat(out.empty() ? "" : ", ", CpuPathName(p));
  return out.empty() ? std::string("none") : out;
}

std::atomic<int>& ActiveSlot() {
  static std::atomic<int> slot{-1};
  return slot;
}

}  // namespace

const std::vector<CpuPath>& SupportedCpuPaths() {
  static const std::vector<CpuPath> kPaths = ReadSupported();
  return kPaths;
}

absl::StatusOr<CpuPath> ChosenCpuPath() {
  const std::vector<CpuPath>& paths = SupportedCpuPaths();
  if (paths.empty()) {
    return absl::FailedPreconditionError(StrCat(
        "this build's kernels need AVX2 and FMA; the host offers: ", HostCpuFeatures().Flags()));
  }
  const char* forced = std::getenv("QUIVER_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return paths.back();
  for (CpuPath p : paths) {
    if (std::strcmp(forced, CpuPathName(p)) == 0) return p;
  }
  return absl::InvalidArgumentError(StrCat("QUIVER_CPU_ISA=", forced,
                                           ": not a kernel path this build runs on this host; "
                                           "it runs: ",
                                           Names(paths),
                                           " (the host offers: ", HostCpuFeatures().Flags(), ")"));
}

CpuPath ActiveCpuPath() {
  int value = ActiveSlot().load(std::memory_order_relaxed);
  if (value < 0) {
    const std::vector<CpuPath>& paths = SupportedCpuPaths();
    const CpuPath fallback = paths.empty() ? CpuPath::kGeneric : paths.back();
    value = static_cast<int>(ChosenCpuPath().value_or(fallback));
    int expected = -1;
    if (!ActiveSlot().compare_exchange_strong(expected, value)) value = expected;
  }
  return static_cast<CpuPath>(value);
}

absl::Status SetActiveCpuPath(CpuPath path) {
  for (CpuPath p : SupportedCpuPaths()) {
    if (p == path) {
      ActiveSlot().store(static_cast<int>(path), std::memory_order_relaxed);
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(StrCat("the ", CpuPathName(path),
                                              " kernel path is not one this build runs here (",
                                              Names(SupportedCpuPaths()), ")"));
}

namespace {
int64_t DefaultPrefetchMinRows() { return HostCpuFeatures().vendor == "AuthenticAMD" ? 1 : 28; }
}  // namespace

absl::StatusOr<int64_t> ChosenPrefetchMinRows() {
  const char* set = std::getenv("QUIVER_PREFETCH_MIN_ROWS");
  if (set == nullptr || *set == '\0') return DefaultPrefetchMinRows();
  char* end = nullptr;
  errno = 0;
  const long long rows = std::strtoll(set, &end, 10);  // NOLINT(google-runtime-int): strtoll's
  if (*end != '\0' || errno != 0 || rows < 1) {
    return absl::InvalidArgumentError(
        StrCat("QUIVER_PREFETCH_MIN_ROWS=", set, ": not a whole number of rows from 1"));
  }
  return static_cast<int64_t>(rows);
}

int64_t StreamedPrefetchMinRows() {
  static const int64_t kRows = ChosenPrefetchMinRows().value_or(DefaultPrefetchMinRows());
  return kRows;
}

std::string CpuSummary() {
  const CpuFeatures& f = HostCpuFeatures();
  absl::StatusOr<CpuPath> chosen = ChosenCpuPath();
  std::string path;
  if (!chosen.ok()) {
    path = std::string(chosen.status().message());
  } else {
    switch (ActiveCpuPath()) {
      case CpuPath::kGeneric:
        path = "generic (plain loops)";
        break;
      case CpuPath::kAvx2:
        path = "avx2 (f32 FMA 8 lanes, int8 vpmaddwd)";
        break;
      case CpuPath::kAvx2Vnni:
        path = "avx2_vnni (f32 FMA 8 lanes, int8 vpdpbusd 256-bit)";
        break;
      case CpuPath::kAvx512:
        path = "avx512 (f32 FMA 16 lanes, int8 vpmaddwd 512-bit)";
        break;
      case CpuPath::kAvx512Vnni:
        path = "avx512_vnni (f32 FMA 16 lanes, int8 vpdpbusd)";
        break;
      case CpuPath::kAmx:
        path = AmxBytesAgree()
                   ? "amx (f32 FMA 16 lanes, int8 tdpbusd tiles)"
                   : "amx (f32 FMA 16 lanes, int8 vpdpbusd: the tiles failed their self-check)";
        break;
    }
  }
  const absl::StatusOr<int64_t> prefetch = ChosenPrefetchMinRows();
  // bf16 weights (--quantize bf16, gemm_bf16.h) where AVX512_BF16 is here and the path allows.
  const bool bf16 = chosen.ok() && f.avx512_bf16 && ActiveCpuPath() >= CpuPath::kAvx512;
  return StrCat(f.brand.empty() ? f.vendor : f.brand, " [", f.Flags(), "]; kernels: ", path,
                !bf16           ? ""
                : Bf16InTiles() ? ", bf16 weights by tdpbf16ps tiles"
                                : ", bf16 weights by vdpbf16ps",
                "; paths here: ", Names(SupportedCpuPaths()), "; ",
                !prefetch.ok()   ? std::string(prefetch.status().message())
                : *prefetch == 1 ? std::string("f32 weights prefetched from 1 row")
                                 : StrCat("f32 weights prefetched from ", *prefetch, " rows"));
}

}  // namespace quiver::engine::cpu
