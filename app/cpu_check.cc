// Runs before every other initializer and is compiled for baseline x86-64 (app/CMakeLists.txt),
// so that on a CPU without what the rest of quiver was built for (x86-64-v3: AVX2, FMA, BMI1/2,
// F16C, MOVBE; cmake/QuiverCompile.cmake) the user reads why instead of getting SIGILL.
#if defined(__x86_64__) && defined(QUIVER_REQUIRE_X86_64_V3)
#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor(101))) void RequireX8664V3() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) return;
  std::fputs(
      "quiver was built for x86-64-v3 (AVX2, FMA, BMI1/2, F16C, MOVBE) and this CPU lacks "
      "some of it; rebuild with cmake -DQUIVER_X86_LEVEL=x86-64\n",
      stderr);
  std::_Exit(1);
}

}  // namespace
#endif
