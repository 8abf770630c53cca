# Decides QUIVER_WITH_CUDA from QUIVER_CUDA. The CUDA sources compile without a GPU present, so CI
# builds them on every run; only running them needs a device.
include(CheckLanguage)

set(QUIVER_WITH_CUDA OFF)
if(QUIVER_CUDA STREQUAL "AUTO" OR QUIVER_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_quiver_nvcc nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
    if(_quiver_nvcc)
      set(CMAKE_CUDA_COMPILER "${_quiver_nvcc}")
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # sm_90 is the H100/H200 the GPU backend targets; override with -DCMAKE_CUDA_ARCHITECTURES.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 13's C++20 flag; device code needs only C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(QUIVER_WITH_CUDA ON)
  elseif(NOT QUIVER_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "QUIVER_CUDA=${QUIVER_CUDA} but no CUDA compiler (nvcc) was found")
  endif()
endif()
