# Reliability tests (issue 7): Oclgrind, numerics, faults, large problems.
# Included from tests/CMakeLists.txt.

# Runs one flashcl operation on dense host arrays and checks it against the
# references (op_harness.h); links the library.
add_library(fcl_ophelp STATIC op_harness.c op_verify.c)
target_link_libraries(fcl_ophelp PUBLIC fcl_ref flashcl m)
target_compile_options(fcl_ophelp PRIVATE ${FCL_TEST_WARNINGS})

# --- Oclgrind: out-of-bounds accesses, API misuse, data races, uninitialised values
# test_oclgrind links tests/oclgrind/shadow_shim.c, which takes the place of
# a few OpenCL calls in the whole program (flashcl's included: the
# executable exports them) to keep Oclgrind's record of defined bytes exact
# and to count the kernels launched (shadow_shim.h says why and how).
add_executable(test_oclgrind test_oclgrind.c oclgrind/shadow_shim.c)
target_link_libraries(test_oclgrind PRIVATE fcl_ophelp ${CMAKE_DL_LIBS})
target_compile_options(test_oclgrind PRIVATE ${FCL_TEST_WARNINGS})
set_target_properties(test_oclgrind PROPERTIES ENABLE_EXPORTS ON)
# fcl_attention_merge's cases of test_kvcache (kvcache_merge.c) under
# Oclgrind need the shim too (without it the plugin's false reports of
# uninitialised values bury the run): the same sources, linked with it.
add_executable(test_oclgrind_merge test_kvcache.c kvcache_merge.c kvcache_bad_input.c
               oclgrind/shadow_shim.c)
target_link_libraries(test_oclgrind_merge PRIVATE fcl_ophelp ${CMAKE_DL_LIBS})
target_compile_options(test_oclgrind_merge PRIVATE ${FCL_TEST_WARNINGS})
set_target_properties(test_oclgrind_merge PROPERTIES ENABLE_EXPORTS ON)
add_executable(oclgrind_shadow_demo oclgrind/shadow_demo.c oclgrind/shadow_shim.c)
target_link_libraries(oclgrind_shadow_demo PRIVATE OpenCL::OpenCL ${CMAKE_DL_LIBS})
target_compile_options(oclgrind_shadow_demo PRIVATE ${FCL_TEST_WARNINGS})
target_compile_definitions(oclgrind_shadow_demo PRIVATE
  SHADOW_DEMO_CL="${CMAKE_CURRENT_SOURCE_DIR}/oclgrind/shadow_demo.cl")
set_target_properties(oclgrind_shadow_demo PROPERTIES ENABLE_EXPORTS ON)
# The RWKV7 kernels on their own (test_oclgrind_rwkv7.c): the static
# library, for the tuning override of their parameters.
add_executable(test_oclgrind_rwkv7 test_oclgrind_rwkv7.c op_rwkv7.c op_harness.c op_verify.c
               oclgrind/shadow_shim.c)
target_link_libraries(test_oclgrind_rwkv7 PRIVATE fcl_ref flashcl_static SQLite::SQLite3 m
                      ${CMAKE_DL_LIBS})
target_compile_options(test_oclgrind_rwkv7 PRIVATE ${FCL_TEST_WARNINGS})
set_target_properties(test_oclgrind_rwkv7 PROPERTIES ENABLE_EXPORTS ON)
find_program(FCL_OCLGRIND oclgrind)
if(FCL_OCLGRIND)
  # One Oclgrind run: test NAME runs target PROG under Oclgrind with the
  # checks CHECKS (unoptimised builds, see above) through
  # oclgrind_check.cmake, on the Oclgrind device without the program cache
  # or tuning database, with ENV added to its environment.
  function(fcl_oclgrind_test name prog)
    cmake_parse_arguments(A "" "" "CHECKS;ENV" ${ARGN})
    add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DOCLGRIND=${FCL_OCLGRIND}
             -DPROG=$<TARGET_FILE:${prog}>
             -DLOG=${CMAKE_CURRENT_BINARY_DIR}/${name}.log
             "-DOPTIONS=${A_CHECKS};--build-options;-cl-opt-disable"
             -P ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.cmake)
    set_tests_properties(${name} PROPERTIES TIMEOUT 900 LABELS "oclgrind" ENVIRONMENT
      "FCL_DEVICE=oclgrind;FCL_CACHE=0;FCL_TUNING_DB=off;${A_ENV}")
  endfunction()
  # Memory checks are on by default; --check-api adds API checks,
  # --data-races the race detector, --uninitialized the check that no
  # value computed from memory nothing wrote reaches a store, a branch or
  # an address. The kernels are built with -cl-opt-disable (Oclgrind's
  # --build-options, appended to every build): Oclgrind 21.10's
  # uninitialised-value plugin aborts on the `freeze` instruction that
  # LLVM's optimiser emits ("Unsupported instruction: freeze"), and
  # unoptimised code keeps every load and store the source makes, so the
  # memory and race checks see at least what they saw on optimised code.
  #
  # One run per set of kernels, each on the small shapes of test_oclgrind.c;
  # FCL_OCLGRIND_KERNELS lists the kernels it must launch:
  #   (plain)    the CPU forward (Oclgrind is a CPU device), the backward,
  #              RWKV6 recurrent, chunked and backward;
  #   _split     FCL_LOOP_BUDGET=1: the portable forward split over keys
  #              with its combine kernel, split gradient sums, RWKV6 in
  #              segments carrying the state, on the cases that take those
  #              paths (the attention case with two key tiles, the chunked
  #              and recurrent RWKV6 ones); the other cases' kernels under
  #              this budget are the plain run's and the _portable run's;
  #   _portable  FCL_CPU_KERNEL=0: the portable forward, unsplit (forward
  #              only: the backward is that of the plain run);
  #   _mma       FCL_MMA_EMULATE=1: the NVIDIA tensor-core kernels with their
  #              warp instructions emulated (cl/common/mma_common.cl), their
  #              probes and the non-finite scan, on three cases (f32: the
  #              3xTF32 forward; bf16 with d = 7; f16 varlen GQA with a NaN
  #              in v, which runs the non-finite variants): the emulated
  #              kernels run about 10 times slower than the others;
  #   _mma_rwkv6 FCL_MMA_EMULATE=1: the chunked RWKV6 kernels on tensor
  #              cores (state pass, output and dv, dr dk dw), emulated, on
  #              the cases with K and V multiples of 16 (bf16, and f32 split
  #              into bf16 pairs), with NVIDIA's 48 KiB
  #              of local memory (the forward then takes its chunks of 64:
  #              4 warps); without --uninitialized, whose plugin (Oclgrind
  #              21.10) crashes with a segmentation fault in them before it
  #              reports anything;
  #   _kvcache_mma FCL_MMA_EMULATE=1: the decode kernel on tensor cores,
  #              emulated, on the f16 GQA cases in pages of 16, one with
  #              its splits merged in the kernel (also with bad
  #              block_table and cache_seqlens entries), with 48 KiB of
  #              local memory;
  #   _kvcache   fcl_attention_kvcache on nine small shapes (contiguous,
  #              paged, more than 64 rows a kv head, no append, f16 GQA in
  #              pages of 16, splits merged in the decode kernel, quantized,
  #              more than 64 rows a kv head gathered from a paged q8_0 and
  #              fp8 cache), each also
  #              with out-of-range cache_seqlens, block_table,
  #              cache_batch_idx and cu_seqlens_q entries: every buffer fits
  #              its view, so an index that escapes its checks is reported.
  # Times in CI's ctest -j2 on 2 cores: about 130 s, 85 s, 45 s, 50 s, 12 s,
  # 60 s and 30 s.
  set(_ocl_bwd fcl_attention_bwd_delta fcl_attention_bwd_dq fcl_attention_bwd_dkdv)
  set(_ocl_rwkv6 fcl_rwkv6_fwd_recurrent fcl_rwkv6_bwd_forward fcl_rwkv6_bwd_reverse
      fcl_rwkv6_bwd_finish fcl_rwkv6_bwd_du fcl_rwkv6_chunk_state fcl_rwkv6_chunk_out
      fcl_rwkv6_chunk_dk fcl_rwkv6_chunk_du)
  set(_ocl_kernels_ fcl_attention_fwd_cpu ${_ocl_bwd} ${_ocl_rwkv6})
  set(_ocl_kernels__split fcl_attention_fwd fcl_attention_fwd_combine ${_ocl_bwd}
      fcl_attention_bwd_sum ${_ocl_rwkv6})
  set(_ocl_kernels__portable fcl_attention_fwd)
  set(_ocl_kernels__mma fcl_mma_probe fcl_mma_tf32_probe fcl_nonfinite_flags
      fcl_attention_fwd_tf32 fcl_attention_fwd_mma fcl_attention_bwd_mma_delta
      fcl_attention_bwd_mma_dq fcl_attention_bwd_mma_dkdv)
  set(_ocl_kernels__mma_rwkv6 fcl_mma_probe fcl_rwkv6_chunk_state_mma fcl_rwkv6_chunk_out_mma
      fcl_rwkv6_chunk_dk fcl_rwkv6_chunk_du)
  # (on tensor cores every case appends in the decode kernel: one tile a kv head)
  set(_ocl_kernels__kvcache_mma fcl_mma_probe fcl_kv_decode_mma)
  set(_ocl_kernels__kvcache fcl_kv_append fcl_kv_decode fcl_kv_prefill_prep
      fcl_kv_gather fcl_attention_fwd_cpu)
  set(_ocl_env_ "")
  set(_ocl_env__split "FCL_LOOP_BUDGET=1" "FCL_TEST_FILTER=MQA two key tiles|chunked|recurrent")
  set(_ocl_env__portable "FCL_CPU_KERNEL=0" "FCL_OCLGRIND_OPS=attention-fwd")
  set(_ocl_env__mma "FCL_MMA_EMULATE=1" "FCL_OCLGRIND_OPS=attention"
      "FCL_TEST_FILTER=window sq>sk empty rows|window both, d 7|NaN in v")
  set(_ocl_env__mma_rwkv6 "FCL_MMA_EMULATE=1" "FCL_OCLGRIND_OPS=rwkv6"
      "FCL_TEST_FILTER=K 16 V 32")
  set(_ocl_env__kvcache_mma "FCL_MMA_EMULATE=1" "FCL_OCLGRIND_OPS=kvcache"
      "FCL_TEST_FILTER=paged 16 GQA")
  set(_ocl_env__kvcache "FCL_OCLGRIND_OPS=kvcache")
  set(_ocl_checks__mma_rwkv6 "--check-api;--data-races;--local-mem-size;49152")
  set(_ocl_checks__kvcache_mma "--check-api;--data-races;--uninitialized;--local-mem-size;49152")
  foreach(variant "" "_split" "_portable" "_mma" "_mma_rwkv6" "_kvcache_mma" "_kvcache")
    set(test test_oclgrind${variant})
    string(JOIN " " kernels ${_ocl_kernels_${variant}})
    set(checks "--check-api;--data-races;--uninitialized")
    if(DEFINED _ocl_checks_${variant})
      set(checks ${_ocl_checks_${variant}})
    endif()
    fcl_oclgrind_test(${test} test_oclgrind CHECKS ${checks}
                      ENV "FCL_OCLGRIND_KERNELS=${kernels}" ${_ocl_env_${variant}})
  endforeach()
  set_tests_properties(test_oclgrind_mma PROPERTIES COST 100)
  # RWKV7 (test_oclgrind_rwkv7.c): the step kernel, the recurrent forward
  # and the backward in segments of one chunk (FCL_SCRATCH_CAP=1), and the
  # chunked forward, with a GPU's parameters forced; then (_mma) the chunked
  # forward's outputs on tensor cores, emulated, with NVIDIA's 48 KiB of
  # local memory. About 17 s and 6 s on 2 shared cores.
  set(_ocl_r7_ "fcl_rwkv7_fwd_step fcl_rwkv7_fwd_recurrent fcl_rwkv7_bwd_reverse fcl_rwkv7_bwd_finish fcl_rwkv7_chunk_prep fcl_rwkv7_chunk_state fcl_rwkv7_chunk_out")
  set(_ocl_r7__mma "fcl_mma_probe fcl_rwkv7_chunk_prep fcl_rwkv7_chunk_state fcl_rwkv7_chunk_out_mma")
  set(_ocl_r7_env__mma "FCL_MMA_EMULATE=1" "FCL_TEST_FILTER=chunked mma")
  set(_ocl_r7_checks__mma "--local-mem-size;49152")
  foreach(variant "" "_mma")
    fcl_oclgrind_test(test_oclgrind_rwkv7${variant} test_oclgrind_rwkv7
      CHECKS --check-api --data-races --uninitialized ${_ocl_r7_checks_${variant}}
      ENV "FCL_SCRATCH_CAP=1" "FCL_OCLGRIND_KERNELS=${_ocl_r7_${variant}}"
          ${_ocl_r7_env_${variant}})
  endforeach()
  # fcl_attention_merge (test_kvcache's merge cases: split forwards and
  # made-up parts, every dtype pair, varlen, in place): about 10 s.
  fcl_oclgrind_test(test_oclgrind_merge test_oclgrind_merge
    CHECKS --check-api --data-races --uninitialized ENV "FCL_TEST_FILTER=merge ")
  # Why the shim is there: the two false reports of Oclgrind's plugin shown
  # on two small kernels (the count of reports in each mode), and a real
  # read of unwritten memory still reported with the shim on. Fails when an
  # Oclgrind without those faults is installed: the shim can then go.
  add_test(NAME test_oclgrind_shadow_demo COMMAND ${CMAKE_COMMAND} -DOCLGRIND=${FCL_OCLGRIND}
           -DPROG=$<TARGET_FILE:oclgrind_shadow_demo>
           -DLOGDIR=${CMAKE_CURRENT_BINARY_DIR}
           -P ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind/shadow_demo.cmake)
  set_tests_properties(test_oclgrind_shadow_demo PROPERTIES TIMEOUT 120 LABELS "oclgrind")
else()
  message(STATUS "oclgrind not found: the Oclgrind tests are not registered")
endif()

# --- libFuzzer target (FCL_FUZZ=ON with clang; see cmake/sanitize.cmake) ---
if(FCL_FUZZ_OK)
  add_executable(fuzz_api fuzz/fuzz_api.c fuzz/fuzz_decode.c)
  target_link_libraries(fuzz_api PRIVATE flashcl_static m)
  target_compile_options(fuzz_api PRIVATE ${FCL_TEST_WARNINGS} -fsanitize=fuzzer)
  target_link_options(fuzz_api PRIVATE -fsanitize=fuzzer)
  # Replays the seed corpus (a regression test); CI also fuzzes for a while.
  # On PoCL flashcl's binary cache is off (src/core/program.c): PoCL's
  # compiler cache, which CI shares with the test suite, serves every kernel
  # (1.4 s), where asking for binaries had PoCL compile each kernel's
  # generic work-group function (146 s).
  add_test(NAME fuzz_api_corpus COMMAND fuzz_api -runs=0 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)
  set_tests_properties(fuzz_api_corpus PROPERTIES TIMEOUT 600 LABELS "fuzz" ENVIRONMENT
    "FCL_FUZZ_DEVICE=pocl;FCL_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/cache/fuzz;XDG_CACHE_HOME=${CMAKE_CURRENT_BINARY_DIR}/cache/xdg")
  # The tuning-database reader, fed damaged SQLite files (seeds: valid
  # databases in tests/fuzz/corpus_db).
  add_executable(fuzz_tuning_db fuzz/fuzz_tuning_db.c)
  target_include_directories(fuzz_tuning_db PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/cl)
  target_link_libraries(fuzz_tuning_db PRIVATE flashcl_static SQLite::SQLite3 m)
  target_compile_options(fuzz_tuning_db PRIVATE ${FCL_TEST_WARNINGS} -fsanitize=fuzzer)
  target_link_options(fuzz_tuning_db PRIVATE -fsanitize=fuzzer)
  add_test(NAME fuzz_tuning_db_corpus
    COMMAND fuzz_tuning_db -runs=0 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus_db)
  set_tests_properties(fuzz_tuning_db_corpus PROPERTIES TIMEOUT 300 LABELS "fuzz")
endif()

# --- faults: build errors, device out of memory, unusable cache ---------------
fcl_add_test(test_faults DEVICE)
target_link_libraries(test_faults PRIVATE fcl_ophelp)
target_compile_definitions(test_faults PRIVATE FCL_SOURCE_CL_DIR="${PROJECT_SOURCE_DIR}/cl")

# --- lifetimes and threads; valgrind finds no leak of flashcl's --------------
fcl_add_test(test_lifecycle DEVICE)
target_link_libraries(test_lifecycle PRIVATE fcl_ophelp Threads::Threads)
find_program(FCL_VALGRIND valgrind)
if(FCL_VALGRIND AND NOT FCL_SANITIZE)
  # 100 cycles (1 with operations), then each thread's work once: definite
  # leaks outside the OpenCL implementations fail the test
  # (tests/valgrind.supp lists theirs). 50 frames a stack: PoCL's compile
  # leaks reach its anchor (pocl_check_kernel_disk_cache) below valgrind's
  # default 12, deep in LLVM's passes. valgrind_check.cmake first runs the
  # same under valgrind --tool=none, so that memcheck finds PoCL's kernels
  # compiled (under valgrind PoCL sees another CPU, so no other test's
  # kernels serve it): about 90 s of one core in all, where memcheck
  # compiling them took about 450 s. Started first (COST), it runs beside
  # the other tests instead of after them. FCL_CACHE=1: flashcl's binary
  # cache on (it is off on PoCL by default), so that memcheck sees its
  # code too. ($<SEMICOLON>: a list in one argument, through ARGS.)
  fcl_add_test(test_lifecycle DEVICE ONLY pocl TEST test_lifecycle_valgrind LABELS valgrind
    ENV "FCL_CACHE=1" PROGRAM ${CMAKE_COMMAND}
    ARGS -DVALGRIND=${FCL_VALGRIND} -DPROG=$<TARGET_FILE:test_lifecycle> "-DARGS=100$<SEMICOLON>1"
         -DWARM_CACHE=${CMAKE_CURRENT_BINARY_DIR}/cache/test_lifecycle_valgrind_warm
         "-DOPTIONS=--error-exitcode=99$<SEMICOLON>--num-callers=50$<SEMICOLON>--leak-check=full$<SEMICOLON>--show-leak-kinds=definite$<SEMICOLON>--errors-for-leak-kinds=definite$<SEMICOLON>--suppressions=${CMAKE_CURRENT_SOURCE_DIR}/valgrind.supp"
         -P ${CMAKE_CURRENT_SOURCE_DIR}/valgrind_check.cmake)
  set_tests_properties(test_lifecycle_valgrind PROPERTIES COST 1000)
endif()

# --- numerics: large magnitude, -inf from masks, NaN inputs -------------------
fcl_add_test(test_numerics DEVICE)
target_link_libraries(test_numerics PRIVATE fcl_ophelp)
# Again on PoCL with the NVIDIA tensor-core kernels' warp instructions
# emulated (FCL_MMA_EMULATE=1, cl/mma_common.cl): the f16 and bf16 cases then
# run the mma forward and backward, the f32 ones the mma forward, where a masked (query, key) pair with an
# inf or NaN operand must stay out of the sums as well. About 50 s from a
# cold cache on 2 cores (the emulated programs build unoptimised).
# The f32 forward runs its 3xTF32 kernel there (FCL_F32_TENSOR_CORES is on
# by default), which scans every K and V tile for inf and NaN.
fcl_add_test(test_numerics DEVICE ONLY pocl SUFFIX _mma_emulated TIMEOUT 600
             ENV "FCL_MMA_EMULATE=1")

# --- large problems (> 2^31 elements, seqlen 65536): a GPU with tens of GiB --
# Always built; registered only with -DFCL_TEST_LARGE=ON, on the device
# FCL_TEST_LARGE_DEVICE (default nvidia), so that no CPU run picks it up:
#   cmake -S . -B build -DFCL_TEST_LARGE=ON && cmake --build build -j
#   ctest --test-dir build -L large --output-on-failure
add_executable(test_large test_large.c)
target_link_libraries(test_large PRIVATE fcl_ref flashcl m)
target_compile_options(test_large PRIVATE ${FCL_TEST_WARNINGS})
option(FCL_TEST_LARGE "Register test_large (needs a GPU with ~40 GiB)" OFF)
set(FCL_TEST_LARGE_DEVICE "nvidia" CACHE STRING "Device selector for test_large")
if(FCL_TEST_LARGE)
  add_test(NAME test_large COMMAND test_large)
  set_tests_properties(test_large PROPERTIES TIMEOUT 1800 LABELS "large"
                       ENVIRONMENT "FCL_DEVICE=${FCL_TEST_LARGE_DEVICE}")
endif()

# --- sanitizer builds: every test runs with these options ----------------------
if(FCL_SANITIZE)
  # fast_unwind_on_malloc=0: full stacks through the (frame-pointer-less)
  # OpenCL libraries, so that lsan.supp can attribute their leaks.
  # intercept_tls_get_addr=0: up to LLVM 16 the runtime's __tls_get_addr
  # interceptor takes a dynamic TLS block that happens to start 16 bytes into
  # a page for a pre-2.25 glibc header and reads a bogus range from before it;
  # LeakSanitizer's tracer then dies scanning it ("Tracer caught signal 11",
  # seen once in CI's API fuzzer). PoCL's libraries, loaded at run time, are
  # where such blocks come from; flashcl keeps no pointers in TLS.
  get_property(_fcl_tests DIRECTORY PROPERTY TESTS)
  foreach(t ${_fcl_tests})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
      "ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0"
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endforeach()
endif()
