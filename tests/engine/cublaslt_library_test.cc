// cuBLASLt opened at run time (kernels/cuda/cublaslt_library.h). Built only with CUDA; CI's
// machines have the toolkit (the CUDA build needs it) but no GPU, and opening the library needs
// none.
#include "engine/kernels/cuda/cublaslt_library.h"

#include <gtest/gtest.h>

#include <string>

namespace quiver::engine::cuda {
namespace {

TEST(CublasLtLibraryTest, TheProcessOpensTheBuildsCublasLtWithEveryFunction) {
  const absl::StatusOr<const CublasLtLibrary*> lt = CublasLtLibrary::Process();
  ASSERT_TRUE(lt.ok()) << lt.status();
  EXPECT_NE((*lt)->path().find(CublasLtLibrary::Soname()), std::string::npos) << (*lt)->path();
  // cublasLtGetVersion: major * 10000 + minor * 100 + patch, of the major compiled against.
  EXPECT_EQ((*lt)->version() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  // The same library on every call, never opened twice.
  EXPECT_EQ(*CublasLtLibrary::Process(), *lt);
  // A resolved function answers as the library's own.
  EXPECT_STREQ((*lt)->fn().cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
               "CUBLAS_STATUS_NOT_SUPPORTED");
}

TEST(CublasLtLibraryTest, AMissingLibraryIsRefusedNamingIt) {
  const auto lt = CublasLtLibrary::Open("libquiver-no-such-cublaslt.so.13");
  ASSERT_FALSE(lt.ok());
  EXPECT_EQ(lt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lt.status().message().find("libquiver-no-such-cublaslt.so.13"), std::string::npos)
      << lt.status();
}

TEST(CublasLtLibraryTest, ALibraryWithoutItsFunctionsIsRefusedNamingTheFirstMissing) {
  // zlib: a real shared library every build here has (gRPC needs it), holding none of them.
  const auto lt = CublasLtLibrary::Open("libz.so.1");
  ASSERT_FALSE(lt.ok());
  const std::string m(lt.status().message());
  EXPECT_NE(m.find("libz.so.1"), std::string::npos) << m;
  EXPECT_NE(m.find("cublasLtCreate"), std::string::npos) << m;
}

}  // namespace
}  // namespace quiver::engine::cuda
