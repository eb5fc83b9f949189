# Runs a program with its standard output sent to a file, for tests whose
# output another test reads (fa_bench_plot's JSON):
#   cmake -DPROG=fa-bench -DOUT=file.json "-DARGS=--json;--op;fwd" -P stdout_to_file.cmake
# Fails when the program exits non-zero; its stderr passes through.
foreach(v PROG OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "stdout_to_file.cmake: -D${v}= is required")
  endif()
endforeach()
file(REMOVE "${OUT}")
execute_process(COMMAND "${PROG}" ${ARGS} OUTPUT_FILE "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} exited with ${rc} (its output: ${OUT})")
endif()
