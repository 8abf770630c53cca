#include "engine/kernels/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <utility>

#include "common/strings.h"

namespace quiver::engine::cuda {

std::string CublasLtLibrary::Soname() { return StrCat("libcublasLt.so.", CUBLAS_VER_MAJOR); }

absl::StatusOr<std::unique_ptr<CublasLtLibrary>> CublasLtLibrary::Open(const std::string& file) {
  dlerror();  // clear an earlier message
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        StrCat("cannot open cuBLASLt (", file, "): ", why != nullptr ? why : "unknown error"));
  }
  std::unique_ptr<CublasLtLibrary> library(new CublasLtLibrary());
  library->handle_ = handle;
#define QUIVER_CUBLASLT_RESOLVE(name)                                                        \
  library->fn_.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));             \
  if (library->fn_.name == nullptr) {                                                        \
    return absl::FailedPreconditionError(                                                    \
        StrCat("cuBLASLt (", file, ") has no function " #name ": not the cuBLASLt of CUDA ", \
               CUBLAS_VER_MAJOR));                                                           \
  }
  QUIVER_CUBLASLT_FUNCTIONS(QUIVER_CUBLASLT_RESOLVE)
#undef QUIVER_CUBLASLT_RESOLVE
  Dl_info info{};
  library->path_ = dladdr(reinterpret_cast<void*>(library->fn_.cublasLtCreate), &info) != 0 &&
                           info.dli_fname != nullptr
                       ? info.dli_fname
                       : file;
  return library;
}

CublasLtLibrary::~CublasLtLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<const CublasLtLibrary*> CublasLtLibrary::Process() {
  // Opened once and never closed: handles and descriptors made from it live until exit.
  static const absl::StatusOr<const CublasLtLibrary*> kProcess =
      []() -> absl::StatusOr<const CublasLtLibrary*> {
    const std::string soname = Soname();
    absl::StatusOr<std::unique_ptr<CublasLtLibrary>> opened = Open(soname);
#ifdef QUIVER_CUDA_LIBRARY_DIR
    if (!opened.ok()) {
      absl::StatusOr<std::unique_ptr<CublasLtLibrary>> in_toolkit =
          Open(StrCat(QUIVER_CUDA_LIBRARY_DIR, "/", soname));
      if (in_toolkit.ok()) opened = std::move(in_toolkit);
    }
#endif
    if (!opened.ok()) {
      return absl::FailedPreconditionError(
          StrCat(opened.status().message(),
#ifdef QUIVER_CUDA_LIBRARY_DIR
                 " (also looked in the build's CUDA toolkit, " QUIVER_CUDA_LIBRARY_DIR ")",
#endif
                 "; running on a GPU needs the CUDA ", CUBLAS_VER_MAJOR,
                 " libraries: install cuBLAS or put the folder that holds ", soname,
                 " on LD_LIBRARY_PATH"));
    }
    return opened->release();
  }();
  return kProcess;
}

}  // namespace quiver::engine::cuda
