# Warnings and sanitizers for every quiver target, through one interface library that each target
# links privately (so third-party headers are not held to our warning level).
add_library(quiver_build_flags INTERFACE)
target_compile_options(quiver_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
  # GCC 12 reports false -Wrestrict / -Wmaybe-uninitialized inside libstdc++ string code.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict -Wno-maybe-uninitialized>)

# The CPU kernels are written for x86-64-v3 (AVX2, FMA: every x86 server CPU since 2013); `quiver`
# refuses to start on a CPU without them (app/cpu_check.cc). -DQUIVER_X86_LEVEL=x86-64 builds for any.
set(QUIVER_X86_LEVEL "x86-64-v3" CACHE STRING "x86-64 microarchitecture level to compile for")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$" AND QUIVER_X86_LEVEL)
  target_compile_options(quiver_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-march=${QUIVER_X86_LEVEL}>)
endif()

if(QUIVER_SANITIZE)
  string(REPLACE "," ";" _quiver_sanitizers "${QUIVER_SANITIZE}")
  foreach(_san IN LISTS _quiver_sanitizers)
    if(NOT _san MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "QUIVER_SANITIZE: unknown sanitizer '${_san}'")
    endif()
  endforeach()
  set(_quiver_san_flags "-fsanitize=${QUIVER_SANITIZE}" -fno-omit-frame-pointer
                        -fno-sanitize-recover=all)
  target_compile_options(quiver_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${_quiver_san_flags}>)
  target_link_options(quiver_build_flags INTERFACE ${_quiver_san_flags})
endif()

# Fuzzing builds instrument every quiver library for coverage, not only the fuzz target.
if(QUIVER_FUZZ)
  target_compile_options(quiver_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

# quiver_library(NAME SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# One library per layer; DEPS are the only layers and packages it may use. The layering test
# (tests/check_layers.py) reads the resulting target graph, so these lines are the contract.
function(quiver_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS} quiver_build_flags)
endfunction()
