// The host's CPU features as the kernels see them, and QUIVER_CPU_ISA: the best path the build
// and the host share is chosen, any of them may be forced, an unknown one or one the host lacks
// is refused naming the variable; QUIVER_PREFETCH_MIN_ROWS likewise.
#include "engine/kernels/cpu/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/strings.h"

namespace quiver::engine::cpu {
namespace {

bool Supported(CpuPath path) {
  for (CpuPath p : SupportedCpuPaths()) {
    if (p == path) return true;
  }
  return false;
}

TEST(CpuFeaturesTest, PathsFollowTheHostsFlags) {
  const CpuFeatures& f = HostCpuFeatures();
  EXPECT_FALSE(f.vendor.empty());
  ASSERT_FALSE(SupportedCpuPaths().empty());
#if defined(__AVX2__) && defined(__FMA__)
  // This binary runs at all, so the host has what it was built for.
  EXPECT_TRUE(f.avx2 && f.fma);
  EXPECT_EQ(SupportedCpuPaths().front(), CpuPath::kAvx2);
  EXPECT_EQ(Supported(CpuPath::kAvx512), f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  EXPECT_EQ(Supported(CpuPath::kAvx512Vnni), Supported(CpuPath::kAvx512) && f.avx512_vnni);
  EXPECT_EQ(Supported(CpuPath::kAvx2Vnni), Supported(CpuPath::kAvx2) && f.avx_vnni);
  if (Supported(CpuPath::kAmx)) {
    EXPECT_TRUE(f.amx_tile && f.amx_int8 && f.avx512_vnni);
  }
#else
  EXPECT_EQ(SupportedCpuPaths().front(), CpuPath::kGeneric);
#endif
  // AVX-512 extensions only with AVX-512 F; VNNI / BF16 at 512 bits only with it too.
  if (!f.avx512f) {
    EXPECT_FALSE(f.avx512_vnni || f.avx512_bf16 || f.avx512bw);
  }
  for (size_t i = 1; i < SupportedCpuPaths().size(); ++i) {
    EXPECT_LT(SupportedCpuPaths()[i - 1], SupportedCpuPaths()[i]);
  }
}

TEST(CpuFeaturesTest, TheBestPathIsChosenAndAnyOtherMayBeForced) {
  unsetenv("QUIVER_CPU_ISA");
  const CpuPath best = SupportedCpuPaths().back();
  EXPECT_EQ(ChosenCpuPath().value_or(CpuPath::kGeneric), best);
  for (CpuPath p : SupportedCpuPaths()) {
    setenv("QUIVER_CPU_ISA", CpuPathName(p), 1);
    EXPECT_EQ(ChosenCpuPath().value_or(CpuPath::kGeneric), p) << CpuPathName(p);
  }
  for (const char* name : {"sse2", "avx512_vnni_typo", "amx", "avx512"}) {
    setenv("QUIVER_CPU_ISA", name, 1);
    absl::StatusOr<CpuPath> chosen = ChosenCpuPath();
    bool known = false;
    for (CpuPath p : SupportedCpuPaths()) known = known || std::string(CpuPathName(p)) == name;
    if (known) continue;
    ASSERT_FALSE(chosen.ok()) << name;
    EXPECT_NE(chosen.status().message().find(std::string("QUIVER_CPU_ISA=") + name),
              std::string::npos)
        << chosen.status();
    EXPECT_NE(chosen.status().message().find(CpuPathName(best)), std::string::npos);
  }
  unsetenv("QUIVER_CPU_ISA");
  EXPECT_NE(CpuSummary().find(std::string("kernels: ") + CpuPathName(ActiveCpuPath())),
            std::string::npos)
      << CpuSummary();
}

TEST(CpuFeaturesTest, ThePrefetchRowsFollowTheVendorOrTheVariable) {
  unsetenv("QUIVER_PREFETCH_MIN_ROWS");
  const int64_t by_vendor = HostCpuFeatures().vendor == "AuthenticAMD" ? 1 : 28;
  EXPECT_EQ(ChosenPrefetchMinRows().value_or(-1), by_vendor);
  setenv("QUIVER_PREFETCH_MIN_ROWS", "", 1);
  EXPECT_EQ(ChosenPrefetchMinRows().value_or(-1), by_vendor);
  for (const char* rows : {"1", "14", "1000000"}) {
    setenv("QUIVER_PREFETCH_MIN_ROWS", rows, 1);
    EXPECT_EQ(ChosenPrefetchMinRows().value_or(-1), std::atoll(rows)) << rows;
  }
  for (const char* bad : {"0", "-3", "12rows", "lots", "99999999999999999999999"}) {
    setenv("QUIVER_PREFETCH_MIN_ROWS", bad, 1);
    absl::StatusOr<int64_t> rows = ChosenPrefetchMinRows();
    ASSERT_FALSE(rows.ok()) << bad;
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rows.status().message().find(std::string("QUIVER_PREFETCH_MIN_ROWS=") + bad),
              std::string::npos)
        << rows.status();
  }
  EXPECT_NE(CpuSummary().find("QUIVER_PREFETCH_MIN_ROWS=99999999999999999999999"),
            std::string::npos)
      << CpuSummary();
  unsetenv("QUIVER_PREFETCH_MIN_ROWS");
  EXPECT_NE(CpuSummary().find(StrCat("f32 weights prefetched from ", by_vendor)), std::string::npos)
      << CpuSummary();
}

TEST(CpuFeaturesTest, TheActivePathCanBeSwitchedToSupportedOnesOnly) {
  const CpuPath before = ActiveCpuPath();
  for (CpuPath p : {CpuPath::kGeneric, CpuPath::kAvx2, CpuPath::kAvx2Vnni, CpuPath::kAvx512,
                    CpuPath::kAvx512Vnni, CpuPath::kAmx}) {
    const absl::Status set = SetActiveCpuPath(p);
    EXPECT_EQ(set.ok(), Supported(p)) << CpuPathName(p) << ": " << set;
    if (set.ok()) {
      EXPECT_EQ(ActiveCpuPath(), p);
    }
  }
  ASSERT_TRUE(SetActiveCpuPath(before).ok());
}

}  // namespace
}  // namespace quiver::engine::cpu
