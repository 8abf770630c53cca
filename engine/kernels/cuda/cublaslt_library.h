// cuBLASLt opened at run time (dlopen) instead of linked. Loading libcublasLt.so.13 costs about
// 150 MB of resident memory in a process (its initializers allocate 94 MB, and 58 MB of its pages
// are touched: docs/engine.md, its "Memory" paragraph), which every `quiver serve` of a CUDA build
// paid at start-up even on --device cpu; and a binary linked to it would not start at all on a
// host without the CUDA libraries. Opened here, a process maps it only when it makes a BlasLt,
// that is when it runs a model on a GPU.
//
// The library is looked up by its soname (LD_LIBRARY_PATH, the cache of ldconfig, the binary's
// RUNPATH), then in the CUDA toolkit the build used.
#pragma once

#include <cublasLt.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace quiver::engine::cuda {

// Every cuBLASLt function quiver calls, by its own name and type.
#define QUIVER_CUBLASLT_FUNCTIONS(X)      \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtGetVersion)                   \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoCheck)              \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)

struct CublasLtFunctions {
#define QUIVER_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  QUIVER_CUBLASLT_FUNCTIONS(QUIVER_CUBLASLT_MEMBER)
#undef QUIVER_CUBLASLT_MEMBER
};

class CublasLtLibrary {
 public:
  // The soname this build was compiled against: libcublasLt.so.<CUBLAS_VER_MAJOR>.
  static std::string Soname();

  // The process's library, opened on the first call (the soname, then the build's toolkit) and
  // kept open; later calls return it, or the same error. The error names the library, where it
  // was looked for and what dlopen said.
  static absl::StatusOr<const CublasLtLibrary*> Process();

  // Opens `file` (a soname or a path) and resolves every function of QUIVER_CUBLASLT_FUNCTIONS;
  // an error names the file and the first function missing, or dlopen's message.
  static absl::StatusOr<std::unique_ptr<CublasLtLibrary>> Open(const std::string& file);

  ~CublasLtLibrary();
  CublasLtLibrary(const CublasLtLibrary&) = delete;
  CublasLtLibrary& operator=(const CublasLtLibrary&) = delete;

  const CublasLtFunctions& fn() const { return fn_; }
  const std::string& path() const { return path_; }  // the file the loader mapped
  size_t version() const { return fn_.cublasLtGetVersion(); }

 private:
  CublasLtLibrary() = default;

  void* handle_ = nullptr;
  std::string path_;
  CublasLtFunctions fn_;
};

}  // namespace quiver::engine::cuda
