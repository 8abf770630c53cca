# -DQUIVER_GPU_ONLY=ON: only the CUDA device check (tests/gpu/quiver_gpu_check) and what it links
# (common, engine), against dependencies carried to a GPU machine instead of Debian's packages:
# scripts/gpu-bundle.sh puts their shared libraries in build-gpu/lib and their headers in
# build-gpu/deps.tgz (scripts/gpu-check.sh unpacks it to build-gpu/deps/include);
# QUIVER_GPU_DEPS_DIR names that build-gpu folder. This is
# scripts/gpu-check.sh's fallback when the binary built on the build machine does not start there;
# it needs only the CUDA toolkit, CMake and a C++20 compiler.
set(QUIVER_GPU_DEPS_DIR "" CACHE PATH "The carried build-gpu folder (scripts/gpu-bundle.sh)")
if(NOT QUIVER_WITH_CUDA)
  message(FATAL_ERROR "QUIVER_GPU_ONLY needs the CUDA toolkit (nvcc)")
endif()
if(NOT EXISTS "${QUIVER_GPU_DEPS_DIR}/deps/include/absl")
  message(FATAL_ERROR "QUIVER_GPU_DEPS_DIR='${QUIVER_GPU_DEPS_DIR}' has no deps/include/absl")
endif()
find_package(Threads REQUIRED)

file(GLOB _quiver_absl_libs "${QUIVER_GPU_DEPS_DIR}/lib/libabsl_*.so*")
file(GLOB _quiver_fmt_libs "${QUIVER_GPU_DEPS_DIR}/lib/libfmt.so*")
file(GLOB _quiver_spdlog_libs "${QUIVER_GPU_DEPS_DIR}/lib/libspdlog.so*")
file(GLOB _quiver_simdjson_libs "${QUIVER_GPU_DEPS_DIR}/lib/libsimdjson.so*")

# One imported target per name the libraries' CMakeLists ask for, all over the carried files
# (the linker keeps only what is used: -Wl,--as-needed in tests/gpu).
function(quiver_carried_target name)
  cmake_parse_arguments(ARG "" "" "LIBS;DEFINES" ${ARGN})
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${QUIVER_GPU_DEPS_DIR}/deps/include"
    INTERFACE_LINK_LIBRARIES "${ARG_LIBS};Threads::Threads"
    INTERFACE_COMPILE_DEFINITIONS "${ARG_DEFINES}")
endfunction()
foreach(_absl status statusor strings flat_hash_map)
  quiver_carried_target(absl::${_absl} LIBS "${_quiver_absl_libs}")
endforeach()
quiver_carried_target(fmt::fmt LIBS "${_quiver_fmt_libs}" DEFINES FMT_SHARED)
quiver_carried_target(spdlog::spdlog LIBS "${_quiver_spdlog_libs};${_quiver_fmt_libs}"
                      DEFINES "SPDLOG_SHARED_LIB;SPDLOG_COMPILED_LIB;SPDLOG_FMT_EXTERNAL;FMT_SHARED")
quiver_carried_target(simdjson::simdjson LIBS "${_quiver_simdjson_libs}")
