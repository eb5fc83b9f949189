# Runs a test program under Oclgrind and fails on any report.
#   cmake -DOCLGRIND=oclgrind -DPROG=test_oclgrind -DLOG=file.log
#         "-DOPTIONS=--check-api;--data-races;--uninitialized;--build-options;-cl-opt-disable"
#         -P oclgrind_check.cmake
# Oclgrind does not change the program's exit status when it finds an error
# (an out-of-bounds access, a data race, an API misuse, a barrier divergence,
# an uninitialised value); it writes a report. --log sends the reports to a
# file, which must stay empty.
foreach(v OCLGRIND PROG LOG)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "oclgrind_check.cmake: -D${v}= is required")
  endif()
endforeach()
file(REMOVE "${LOG}")
execute_process(COMMAND "${OCLGRIND}" ${OPTIONS} --log "${LOG}" "${PROG}"
                RESULT_VARIABLE rc)
set(reports "")
if(EXISTS "${LOG}")
  file(READ "${LOG}" reports)
endif()
if(NOT reports STREQUAL "")
  string(LENGTH "${reports}" n)
  if(n GREATER 20000)
    string(SUBSTRING "${reports}" 0 20000 reports)
    set(reports "${reports}\n... (${n} bytes in ${LOG})")
  endif()
  message(FATAL_ERROR "Oclgrind reported errors (${OPTIONS}):\n${reports}")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} under Oclgrind exited with ${rc}")
endif()
message(STATUS "Oclgrind (${OPTIONS}): no reports")
