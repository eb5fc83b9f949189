# Runs shadow_demo (shadow_demo.c says what each mode does) under
#   oclgrind --uninitialized --build-options -cl-opt-disable
# and checks the number of "Uninitialized value" reports of each mode:
#   reuse  60 false reports (Oclgrind keeps a released buffer's shadow)
#   fill   63 or 64 false reports (a fill replaces the shadow per pattern)
#   shim   none (the shim of test_oclgrind removes both)
#   real   32 (the shim hides no real read of unwritten memory)
#   cmake -DOCLGRIND=oclgrind -DPROG=oclgrind_shadow_demo -DLOGDIR=dir
#         -P shadow_demo.cmake
foreach(v OCLGRIND PROG LOGDIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "shadow_demo.cmake: -D${v}= is required")
  endif()
endforeach()

set(failed "")
foreach(mode reuse fill shim real)
  set(log "${LOGDIR}/oclgrind_shadow_demo_${mode}.log")
  file(REMOVE "${log}")
  execute_process(COMMAND "${OCLGRIND}" --uninitialized --build-options -cl-opt-disable
                          --log "${log}" "${PROG}" ${mode}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(n 0)
  if(EXISTS "${log}")
    file(STRINGS "${log}" lines REGEX "^Uninitialized value")
    list(LENGTH lines n)
  endif()
  if(mode STREQUAL "reuse")
    set(ok_n "${n}" EQUAL 60)
  elseif(mode STREQUAL "fill")
    set(ok_n "${n}" GREATER_EQUAL 63)
  elseif(mode STREQUAL "shim")
    set(ok_n "${n}" EQUAL 0)
  else()
    set(ok_n "${n}" EQUAL 32)
  endif()
  message(STATUS "shadow_demo ${mode}: ${n} reports")
  if(NOT rc EQUAL 0)
    string(APPEND failed "\n  ${mode}: exited with ${rc}: ${out}")
  elseif(NOT (${ok_n}))
    string(APPEND failed "\n  ${mode}: ${n} reports (${log})")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "shadow_demo: unexpected report counts:${failed}\n"
          "If reuse and fill now give 0, this Oclgrind tracks released buffers and "
          "fills correctly, and tests/oclgrind/shadow_shim.c can go.")
endif()
