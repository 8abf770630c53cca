// Linked into the engine tests that ctest runs once per kernel path (tests/CMakeLists.txt,
// quiver_test_per_cpu_path): QUIVER_CPU_ISA names the path; where this build or host cannot run
// it, every test of the binary is skipped, saying so (ctest reports them as skipped, not passed).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "engine/kernels/cpu/cpu_features.h"

namespace quiver::engine::cpu {
namespace {

class CpuPathEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* forced = std::getenv("QUIVER_CPU_ISA");
    if (forced == nullptr || *forced == '\0') return;
    const absl::StatusOr<CpuPath> chosen = ChosenCpuPath();
    if (!chosen.ok()) GTEST_SKIP() << "not run on this host: " << chosen.status().message();
    std::printf("kernel path: %s\n", CpuPathName(ActiveCpuPath()));
  }
};

::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CpuPathEnvironment);

}  // namespace
}  // namespace quiver::engine::cpu
