# Runs PROG under valgrind's memcheck and fails as memcheck says
# (test_lifecycle_valgrind), after the same run under valgrind's
# --tool=none to fill PoCL's kernel cache:
#   cmake -DVALGRIND=valgrind -DPROG=test_lifecycle "-DARGS=100;1"
#         "-DOPTIONS=--error-exitcode=99;..." -DWARM_CACHE=dir -P valgrind_check.cmake
# Why: PoCL keys its kernel cache on the CPU that LLVM detects, and under
# valgrind that is the CPU valgrind emulates (no AVX-512: "haswell" on a
# "skylake-avx512" host), so no native test's kernels serve the memcheck run:
# it compiled them all itself, inside memcheck (~450 s of one core on 2
# shared cores). --tool=none emulates the same CPU at a fraction of
# memcheck's cost (~75 s) and leaves the kernels in PoCL's cache (the same
# POCL_CACHE_DIR or XDG_CACHE_HOME), so memcheck compiles none (~15 s).
# The warm-up has its own, emptied, FCL_CACHE_DIR (WARM_CACHE): it builds
# every program from source and stores its binary, as the memcheck run does
# with its own cache, so PoCL compiles the same kernels for both.
foreach(v VALGRIND PROG WARM_CACHE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "valgrind_check.cmake: -D${v}= is required")
  endif()
endforeach()

set(cache "$ENV{FCL_CACHE_DIR}")
file(REMOVE_RECURSE "${WARM_CACHE}")
set(ENV{FCL_CACHE_DIR} "${WARM_CACHE}")
string(TIMESTAMP t0 "%s")
execute_process(COMMAND "${VALGRIND}" --tool=none -q "${PROG}" ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(TIMESTAMP t1 "%s")
math(EXPR dt "${t1} - ${t0}")
# A failure here shows again, with memcheck's reports, in the run below.
message(STATUS "warm-up under valgrind --tool=none: exit ${rc}, ${dt} s")
if(NOT rc EQUAL 0)
  message(STATUS "${out}")
endif()

if(cache STREQUAL "")
  unset(ENV{FCL_CACHE_DIR})
else()
  set(ENV{FCL_CACHE_DIR} "${cache}")
endif()
execute_process(COMMAND "${VALGRIND}" ${OPTIONS} "${PROG}" ${ARGS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} under valgrind exited with ${rc}")
endif()
