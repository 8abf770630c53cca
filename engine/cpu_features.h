// What the host's x86 CPU offers the kernels, read once from cpuid (and xgetbv: the operating
// system must save the wider registers for a feature to count), and which kernel path runs.
//
// Today every f32 kernel is the AVX2 + FMA one (the x86-64-v3 build) and int8 products use AVX2
// vpmaddwd; the wider paths (AVX-512, AVX-512 VNNI, AVX512_BF16, AMX) are detected and reported
// so a deployment and a benchmark say what the host could run, but have no kernels yet.
// QUIVER_CPU_ISA names a path to force (tests, benchmarks): only "avx2" exists; any other value
// is refused at start-up, naming the paths there are.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace quiver::engine {

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

// The kernel path that runs: "avx2" (QUIVER_CPU_ISA may only name that one today), or
// "generic" on a build without AVX2. INVALID_ARGUMENT naming the variable for another value.
absl::StatusOr<std::string> ChosenCpuPath();

// One line for logs and `quiver version`: the CPU, its flags and the path chosen.
std::string CpuSummary();

}  // namespace quiver::engine
