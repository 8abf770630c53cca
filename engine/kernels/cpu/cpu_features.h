// What the host's x86 CPU offers the kernels, read once from cpuid (and xgetbv: the operating
// system must save the wider registers for a feature to count), and which kernel path runs.
//
// One binary holds every path; the kernels dispatch on ActiveCpuPath() at each call (one relaxed
// atomic load). The paths, each a superset of the ones before it but avx2_vnni:
//   generic      a build without AVX2 (-DQUIVER_X86_LEVEL=x86-64): plain loops
//   avx2         AVX2 + FMA: f32 GEMM 8 lanes wide, int8 products by vpmaddwd on 256 bits
//   avx2_vnni    + AVX-VNNI (Alder Lake and later, Sierra Forest): int8 products by vpdpbusd on
//                256 bits over the byte activations; the one path the next ones do not include
//                (an AVX-512 host may lack AVX-VNNI: Zen 4, Ice Lake), listed only where present
//   avx512       AVX-512 F/BW/VL/DQ: f32 GEMM 16 lanes wide (14 x 32 micro-kernel), int8
//                vpmaddwd on 512 bits, GELU and softmax on 16 lanes
//   avx512_vnni  + AVX-512 VNNI: int8 products by vpdpwssd (multiply and add fused)
//   amx          + AMX-TILE / AMX-INT8 (and the kernel's permission from Linux): int8 products
//                in tdpbusd tiles on the byte activations; with AMX-BF16 also the bf16 products
//                (bf16 weights, attention's bf16 products) in tdpbf16ps tiles
// Every path computes the same numbers: the f32 GEMMs add each element's products in k order
// from its bias with one rounding per fused multiply-add, and the int8 ones sum exact integers,
// so the paths agree bit for bit on every product (tests/engine/cpu_paths_test.cc) but one: the
// bf16 tiles sum in their own order, within f32 rounding of vdpbf16ps (gemm_bf16_amx.cc); the
// 16-lane GELU and softmax are the 8-lane operations on more lanes (the same bits), and the other
// row-wise passes (norms, the int16 quantization) are the avx2 code on every path.
//
// QUIVER_CPU_ISA names a path to force (tests, benchmarks, a user who wants the AVX2 path on an
// AVX-512 host, e.g. where 512-bit code lowers the clock): a path the build or the host lacks,
// or an unknown name, is refused at start-up, naming the paths there are. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quiver::engine::cpu {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   // the processor brand string
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx_vnni = false, avx512_bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // The flags above that hold, space-separated ("avx2 fma f16c avx512f ...").
  std::string Flags() const;
};

// The host's, read on first use.
const CpuFeatures& HostCpuFeatures();

enum class CpuPath { kGeneric, kAvx2, kAvx2Vnni, kAvx512, kAvx512Vnni, kAmx };

const char* CpuPathName(CpuPath path);  // "generic", "avx2", "avx2_vnni", "avx512", ..., "amx"

// The paths this build can run on this host, in increasing order (the last is the best). The
// amx path asks Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM) the first time; a
// kernel that refuses leaves it out.
const std::vector<CpuPath>& SupportedCpuPaths();

// The path QUIVER_CPU_ISA names, or the best supported one when it is unset or empty.
// INVALID_ARGUMENT naming the variable and the supported paths for an unknown name or one this
// build or host cannot run.
absl::StatusOr<CpuPath> ChosenCpuPath();

// The path the kernels run: ChosenCpuPath() on first use (the best supported one if that was
// refused: Engine::Load refuses the start-up instead), or what SetActiveCpuPath set since.
CpuPath ActiveCpuPath();

// Runs the kernels on `path` from now on (tests and benchmarks compare the paths in one
// process). FAILED_PRECONDITION if the build or host cannot run it. Not meant to race with
// running kernels: a product started before the switch may finish on either path.
absl::Status SetActiveCpuPath(CpuPath path);

// The fewest rows of x for which the f32 kernels prefetch a streamed layer's next weight panels
// into L2 while they work on the current ones (gemm.h). On AMD hosts from 1 row: on a Zen 5 a
// panel's first strip of rows otherwise waits on L3 even for a search query's few rows (batch-1
// over the short queries 15-24% faster with it at 2 threads, 16 tokens 10-15%, docs/benchmarks.md,
// "Zen 5, run 5"). On
// the others from 28 rows (two strips of the AVX-512 kernel): on the Xeon of docs/benchmarks.md,
// whose own L2 prefetcher keeps up, asking for a pair's lines in one strip made the short queries
// 5-9% slower. QUIVER_PREFETCH_MIN_ROWS (a whole number from 1) sets it instead, for benchmarks
// that compare the rules on one host; another value is INVALID_ARGUMENT naming the variable.
absl::StatusOr<int64_t> ChosenPrefetchMinRows();

// ChosenPrefetchMinRows(), read once (the default where it was refused: Engine::Load refuses the
// start-up instead).
int64_t StreamedPrefetchMinRows();

// One line for logs and `quiver version`: the CPU, its flags and the path chosen.
std::string CpuSummary();

}  // namespace quiver::engine::cpu
