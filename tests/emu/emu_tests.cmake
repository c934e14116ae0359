# Included by tests/CMakeLists.txt (gtest_discover_tests needs the targets' directory). The CUDA
# backend on the emulated device (TPBATCH_CUDA=EMU; cuemu/): the GPU tests, plain and
# under each sanitizer, the emulator's own planted-bug tests, and the NCCL stand-in between ranks.
set(EMU_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR}/emu)
# (The sanitized flavours bring their own options: cuemu/sanitizer_defaults.cpp.)
set(EMU_TEST_ENV "TPBATCH_SOURCE_DIR=${PROJECT_SOURCE_DIR}")

# tests/gpu: every kernel against its CPU twin, the whole model against the CPU backend.
# The NCCL tests need two ranks (emu.two_ranks.* below); the cuBLAS differential test needs the real
# cuBLAS: neither is registered here, where they could only skip.
set(EMU_ONE_PROCESS_FILTER "-Nccl*:CublasMatchesTheEmulator.*")
gtest_discover_tests(tpbatch_gpu_tests TEST_PREFIX emu. DISCOVERY_TIMEOUT 120 TEST_FILTER ${EMU_ONE_PROCESS_FILTER}
  PROPERTIES LABELS emu TIMEOUT 900 ENVIRONMENT "${EMU_TEST_ENV}")
foreach(flavour asan tsan)
  add_executable(tpbatch_gpu_tests_${flavour} ${GPU_TEST_SOURCES})
  target_link_libraries(tpbatch_gpu_tests_${flavour} PRIVATE tpbatch_cuda_${flavour} tpbatch_host_core GTest::gtest
    GTest::gtest_main)
  target_compile_options(tpbatch_gpu_tests_${flavour} PRIVATE ${CUEMU_FLAGS_${flavour}})
  target_compile_definitions(tpbatch_gpu_tests_${flavour} PRIVATE TPBATCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(tpbatch_gpu_tests_${flavour} TEST_PREFIX emu_${flavour}. DISCOVERY_TIMEOUT 120
    TEST_FILTER ${EMU_ONE_PROCESS_FILTER} PROPERTIES LABELS emu TIMEOUT 1200 ENVIRONMENT "${EMU_TEST_ENV}")
endforeach()

# The NCCL tests of tests/gpu between two ranks; each abort test in its own run (it leaves its
# communicators aborted).
set(EMU_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;CUEMU_DEVICES=2;${EMU_TEST_ENV}")
foreach(filter Nccl.* NcclAbort.AbortEndsAPendingReceiveAndTheStreamDrains
    NcclAbort.PeerGoneDuringAWaitAbortsTheCommunicatorsAndThrows)
  string(REPLACE ".*" "" name ${filter})
  add_test(NAME emu.two_ranks.${name} COMMAND mpirun -np 2 --oversubscribe --bind-to none
    $<TARGET_FILE:tpbatch_gpu_tests> --gtest_filter=${filter})
  set_tests_properties(emu.two_ranks.${name} PROPERTIES LABELS emu TIMEOUT 300 ENVIRONMENT "${EMU_MPI_ENV}")
endforeach()

# The emulator's specification: planted bugs beside their correct twins.
cuemu_host_sources(PLANTED_SOURCES ${EMU_TEST_DIR}/planted_kernels.cu)
add_custom_target(cuemu_planted_sources DEPENDS ${PLANTED_SOURCES})
foreach(flavour plain asan tsan)
  set(name cuemu_planted_bugs_${flavour})
  set(runtime cuemu_${flavour})
  if(flavour STREQUAL "plain")
    set(runtime cuemu)
  endif()
  add_executable(${name} ${EMU_TEST_DIR}/test_planted_bugs.cpp ${PLANTED_SOURCES})
  add_dependencies(${name} cuemu_planted_sources)
  target_include_directories(${name} PRIVATE ${EMU_TEST_DIR})
  target_link_libraries(${name} PRIVATE ${runtime} GTest::gtest GTest::gtest_main)
  if(NOT flavour STREQUAL "plain")
    target_compile_options(${name} PRIVATE ${CUEMU_FLAGS_${flavour}})
    string(TOUPPER ${flavour} up)
    target_compile_definitions(${name} PRIVATE CUEMU_TEST_${up}=1)
  endif()
  set(filter "*")  # a bug only AddressSanitizer sees is checked in that build alone
  if(NOT flavour STREQUAL "asan")
    set(filter "-*CaughtByAddressSanitizer")
  endif()
  gtest_discover_tests(${name} TEST_PREFIX cuemu_${flavour}. DISCOVERY_TIMEOUT 60 TEST_FILTER ${filter}
    PROPERTIES LABELS emu TIMEOUT 300 ENVIRONMENT "${EMU_TEST_ENV}")
endforeach()

add_executable(cuemu_nccl_probe ${EMU_TEST_DIR}/nccl_probe.cpp)
target_link_libraries(cuemu_nccl_probe PRIVATE cuemu MPI::MPI_CXX)
add_test(NAME cuemu.nccl_planted_bugs COMMAND bash ${EMU_TEST_DIR}/nccl_planted_bugs.sh
  $<TARGET_FILE:cuemu_nccl_probe>)
set_tests_properties(cuemu.nccl_planted_bugs PROPERTIES LABELS emu TIMEOUT 300)

# The engine end to end on the emulated device against the CPU backend (the same binary).
file(GLOB EMU_E2E_TESTS CONFIGURE_DEPENDS ${EMU_TEST_DIR}/test_*.sh)
foreach(script ${EMU_E2E_TESTS})
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME emu.${name} COMMAND bash ${script})
  set_tests_properties(emu.${name} PROPERTIES LABELS emu TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "TPBATCH_CHECKED_BACKEND=1;TPBATCH=$<TARGET_FILE:tpbatch>;TPBATCH_SOURCE_DIR=${PROJECT_SOURCE_DIR};TPBATCH_BUILD_DIR=${PROJECT_BINARY_DIR}")
endforeach()

# What `ctest -L emu` needs, and no more (scripts/test.sh builds only this in the emulated tree).
add_custom_target(emu_tests DEPENDS tpbatch tpbatch_gpu_tests tpbatch_gpu_tests_asan tpbatch_gpu_tests_tsan
  cuemu_planted_bugs_plain cuemu_planted_bugs_asan cuemu_planted_bugs_tsan cuemu_nccl_probe)
