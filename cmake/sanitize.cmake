# Sanitizer and fuzzing builds (issue 7).
#
# FCL_SANITIZE=<list>: builds everything (library, tests, tools) with
#   -fsanitize=<list> -fno-sanitize-recover=all, e.g. -DFCL_SANITIZE=address,undefined.
#   The tests then run with tests/lsan.supp, which silences leaks inside the
#   OpenCL implementations (PoCL, the ICD loader, LLVM), never in flashcl.
# FCL_FUZZ=ON: builds the libFuzzer target tests/fuzz/fuzz_api (needs clang
#   with -fsanitize=fuzzer). Everything is then compiled with
#   -fsanitize=fuzzer-no-link for coverage; combine with FCL_SANITIZE.
set(FCL_SANITIZE "" CACHE STRING
    "Build with -fsanitize=<list> (e.g. address,undefined); empty: off")
option(FCL_FUZZ "Build the libFuzzer target tests/fuzz/fuzz_api (clang)" OFF)

if(FCL_SANITIZE)
  add_compile_options(-fsanitize=${FCL_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${FCL_SANITIZE})
  # The OpenCL implementations (LLVM inside PoCL) throw C++ exceptions from
  # libraries loaded at run time; ASan's __cxa_throw interceptor needs the
  # C++ runtime present at start-up, or it aborts ("real___cxa_throw != 0").
  add_link_options(-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state)
  message(STATUS "flashcl: sanitizers ${FCL_SANITIZE}")
endif()

set(FCL_FUZZ_OK OFF)
if(FCL_FUZZ)
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
  check_c_source_compiles(
    "#include <stdint.h>
     #include <stddef.h>
     int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }"
    FCL_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(FCL_HAVE_LIBFUZZER)
    set(FCL_FUZZ_OK ON)
    add_compile_options(-fsanitize=fuzzer-no-link)
    message(STATUS "flashcl: libFuzzer target fuzz_api enabled")
  else()
    message(WARNING "FCL_FUZZ=ON but ${CMAKE_C_COMPILER} has no -fsanitize=fuzzer "
                    "(use clang: CC=clang); fuzz_api is not built")
  endif()
endif()
