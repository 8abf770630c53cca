# Decides QUIVER_WITH_CUDA from QUIVER_CUDA. The CUDA sources compile without a GPU present, so CI
# builds them on every run; only running them needs a device.
#
# CUDA translation units are built for sm_90a (H100/H200: wgmma and TMA need the `a`), as C++20
# (CMake 3.25 knows no -std flag for nvcc 13, so it is given here), against the CCCL that comes
# with FlashInfer's headers (>= 3.6; the toolkit's 3.0.1 lacks what FlashInfer uses), which
# scripts/fetch-flashinfer.sh unpacks into .cache/flashinfer. QUIVER_FLASHINFER_DIR points
# elsewhere (the GPU machine's rebuild unpacks a tarball of the same headers).
include(CheckLanguage)

set(QUIVER_WITH_CUDA OFF)
set(QUIVER_FLASHINFER_DIR "${PROJECT_SOURCE_DIR}/.cache/flashinfer" CACHE PATH
    "FlashInfer headers with their CUTLASS and CCCL (scripts/fetch-flashinfer.sh)")
if(QUIVER_CUDA STREQUAL "AUTO" OR QUIVER_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_quiver_nvcc nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
    if(_quiver_nvcc)
      set(CMAKE_CUDA_COMPILER "${_quiver_nvcc}")
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 flag for nvcc 13 (it would compile C++17, or refuse a target that
    # asks for C++20); tell it the flag.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit REQUIRED)
    if(NOT EXISTS "${QUIVER_FLASHINFER_DIR}/include/flashinfer/attention/hopper/prefill_sm90.cuh")
      message(FATAL_ERROR "no FlashInfer headers in ${QUIVER_FLASHINFER_DIR}: run "
                          "scripts/fetch-flashinfer.sh (make test and make serve do), or configure "
                          "with -DQUIVER_CUDA=OFF")
    endif()
    set(QUIVER_WITH_CUDA ON)
    # What every CUDA translation unit of quiver compiles with (engine/CMakeLists.txt).
    set(QUIVER_CUDA_INCLUDES
        "${QUIVER_FLASHINFER_DIR}/cccl/libcudacxx/include"
        "${QUIVER_FLASHINFER_DIR}/cccl/cub"
        "${QUIVER_FLASHINFER_DIR}/cccl/thrust"
        "${QUIVER_FLASHINFER_DIR}/include"
        "${QUIVER_FLASHINFER_DIR}/cutlass/include"
        "${QUIVER_FLASHINFER_DIR}/cutlass/tools/util/include")
    set(QUIVER_CUDA_FLAGS --expt-relaxed-constexpr)
  elseif(NOT QUIVER_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "QUIVER_CUDA=${QUIVER_CUDA} but no CUDA compiler (nvcc) was found")
  endif()
endif()
