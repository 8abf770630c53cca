// The host's CPU features as the kernels see them, and QUIVER_CPU_ISA: the path a build has is
// chosen, forcing it is allowed, naming a path the build lacks is refused naming the variable.
#include "engine/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace quiver::engine {
namespace {

TEST(CpuFeaturesTest, TheBuildsPathIsChosenAndOnlyItMayBeForced) {
  const CpuFeatures& f = HostCpuFeatures();
  EXPECT_FALSE(f.vendor.empty());
#if defined(__AVX2__) && defined(__FMA__)
  // This binary runs at all, so the host has what it was built for.
  EXPECT_TRUE(f.avx2 && f.fma);
  EXPECT_NE(f.Flags().find("avx2"), std::string::npos);
  const std::string built = "avx2";
#else
  const std::string built = "generic";
#endif
  // AVX-512 extensions only with AVX-512 F; VNNI / BF16 at 512 bits only with it too.
  if (!f.avx512f) EXPECT_FALSE(f.avx512_vnni || f.avx512_bf16 || f.avx512bw);
  unsetenv("QUIVER_CPU_ISA");
  EXPECT_EQ(ChosenCpuPath().value_or("?"), built);
  setenv("QUIVER_CPU_ISA", built.c_str(), 1);
  EXPECT_EQ(ChosenCpuPath().value_or("?"), built);
  setenv("QUIVER_CPU_ISA", "avx512_vnni", 1);
  absl::StatusOr<std::string> refused = ChosenCpuPath();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("QUIVER_CPU_ISA=avx512_vnni"), std::string::npos);
  unsetenv("QUIVER_CPU_ISA");
  EXPECT_NE(CpuSummary().find("kernels: " + built), std::string::npos) << CpuSummary();
}

}  // namespace
}  // namespace quiver::engine
