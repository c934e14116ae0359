# The emulated CUDA device (TPBATCH_CUDA=EMU): the unchanged CUDA backend and kernels run on the
# CPU. Included by the top-level CMakeLists.txt; defines
#   cuemu_host_sources(OUT sources...)   kernels/*.cu rewritten (cu2cpp.cmake) to host C++
#   cuemu_device_library(TARGET FLAVOUR) makes TARGET (sources already set) an emulated-device library
#   cuemu_sanitized_copies(TARGET)        TARGET_asan (AddressSanitizer + UBSan) and TARGET_tsan copies
# and the runtime libraries cuemu, cuemu_asan, cuemu_tsan (the CUDA runtime, cuBLAS and NCCL stand-ins).
set(CUEMU_DIR ${CMAKE_CURRENT_LIST_DIR})

# Only the CUDA headers are needed: the CUDA toolkit's, wherever it lies, or NCCL's own.
find_path(CUEMU_CUDA_INCLUDE_DIR cuda_runtime.h HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES include)
find_path(CUEMU_CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${CUEMU_CUDA_INCLUDE_DIR} ENV CUDA_HOME /usr/local/cuda
  PATH_SUFFIXES include)
find_path(CUEMU_NCCL_INCLUDE_DIR nccl.h HINTS ${CUEMU_CUDA_INCLUDE_DIR} ENV NCCL_HOME ENV TPBATCH_PREFIX
  /usr/local/cuda PATH_SUFFIXES include)
if(NOT CUEMU_CUDA_INCLUDE_DIR OR NOT CUEMU_CUBLAS_INCLUDE_DIR OR NOT CUEMU_NCCL_INCLUDE_DIR)
  message(FATAL_ERROR "TPBATCH_CUDA=EMU needs the CUDA headers (cuda_runtime.h, cublas_v2.h) and nccl.h: found "
    "'${CUEMU_CUDA_INCLUDE_DIR}', '${CUEMU_CUBLAS_INCLUDE_DIR}', '${CUEMU_NCCL_INCLUDE_DIR}' (set CUDA_HOME / NCCL_HOME)")
endif()
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  message(FATAL_ERROR "TPBATCH_CUDA=EMU: the emulated device's fibers are x86-64 only")
endif()
message(STATUS "CUDA backend: emulated device (headers ${CUEMU_CUDA_INCLUDE_DIR}, ${CUEMU_NCCL_INCLUDE_DIR})")
set(CUEMU_INCLUDE_DIRS ${CUEMU_CUDA_INCLUDE_DIR} ${CUEMU_CUBLAS_INCLUDE_DIR} ${CUEMU_NCCL_INCLUDE_DIR})

# What each flavour adds to compile and link lines. -fno-sanitize=null: GCC 12's null check misfires on
# the kernels' thread_local block state under the fibers (a real null dereference still faults,
# and AddressSanitizer reports the fault).
set(CUEMU_FLAGS_asan -fsanitize=address,undefined -fno-sanitize=null -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
set(CUEMU_FLAGS_tsan -fsanitize=thread)

# The runtime: NAME (streams, memory, copies, launches, cuBLAS, NCCL) and NAME_executor (fibers and
# the block scheduler). Under ThreadSanitizer the executor itself is not instrumented (the fibers
# share its bookkeeping on purpose); it tells ThreadSanitizer about every switch instead.
function(cuemu_runtime NAME FLAVOUR)
  add_library(${NAME}_executor STATIC ${CUEMU_DIR}/block_executor.cpp ${CUEMU_DIR}/fiber.cpp)
  add_library(${NAME} STATIC ${CUEMU_DIR}/streams.cpp ${CUEMU_DIR}/device_memory.cpp ${CUEMU_DIR}/copies.cpp
    ${CUEMU_DIR}/launch.cpp ${CUEMU_DIR}/device_queries.cpp ${CUEMU_DIR}/cublas.cpp ${CUEMU_DIR}/gemm_reference.cpp
    ${CUEMU_DIR}/nccl.cpp)
  foreach(t ${NAME}_executor ${NAME})
    target_include_directories(${t} SYSTEM PUBLIC ${CUEMU_INCLUDE_DIRS})
    target_include_directories(${t} PUBLIC ${CUEMU_DIR})
    target_compile_options(${t} PRIVATE -Wall -Wextra)
  endforeach()
  target_link_libraries(${NAME} PUBLIC ${NAME}_executor Threads::Threads rt)
  if(FLAVOUR STREQUAL "tsan")
    target_compile_definitions(${NAME}_executor PRIVATE CUEMU_TSAN=1)
    target_compile_options(${NAME} PRIVATE ${CUEMU_FLAGS_tsan})
  elseif(FLAVOUR)
    target_compile_options(${NAME}_executor PRIVATE ${CUEMU_FLAGS_${FLAVOUR}})
    target_compile_options(${NAME} PRIVATE ${CUEMU_FLAGS_${FLAVOUR}})
  endif()
  if(FLAVOUR)
    target_link_options(${NAME} INTERFACE ${CUEMU_FLAGS_${FLAVOUR}})
    target_sources(${NAME} INTERFACE ${CUEMU_DIR}/sanitizer_defaults.cpp)  # into each program, not the archive
  endif()
endfunction()
cuemu_runtime(cuemu "")

# kernels/*.cu -> <build>/cuemu_kernels/*.cpp, compiled with kernel_prelude.h force-included.
function(cuemu_host_sources OUT)
  set(result "")
  foreach(src ${ARGN})
    if(src MATCHES "\\.cu$")
      get_filename_component(stem ${src} NAME_WE)
      set(out ${CMAKE_BINARY_DIR}/cuemu_kernels/${stem}.cpp)
      add_custom_command(OUTPUT ${out}
        COMMAND ${CMAKE_COMMAND} -DIN=${src} -DOUT=${out} -P ${CUEMU_DIR}/cu2cpp.cmake
        DEPENDS ${src} ${CUEMU_DIR}/cu2cpp.cmake VERBATIM)
      set_source_files_properties(${out} PROPERTIES COMPILE_OPTIONS "-include;${CUEMU_DIR}/kernel_prelude.h")
      list(APPEND result ${out})
      set_property(GLOBAL APPEND PROPERTY CUEMU_KERNEL_SOURCES ${out})
    else()
      list(APPEND result ${src})
    endif()
  endforeach()
  set(${OUT} ${result} PARENT_SCOPE)
endfunction()

function(cuemu_device_library TARGET FLAVOUR)
  set(runtime cuemu)
  if(FLAVOUR)
    set(runtime cuemu_${FLAVOUR})
    target_compile_options(${TARGET} PRIVATE ${CUEMU_FLAGS_${FLAVOUR}})
  endif()
  target_include_directories(${TARGET} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/kernels)
  target_link_libraries(${TARGET} PUBLIC ${runtime})
  # One rewrite step for every copy of the library (several targets must not run it at once).
  if(NOT TARGET cuemu_kernel_sources)
    get_property(outs GLOBAL PROPERTY CUEMU_KERNEL_SOURCES)
    add_custom_target(cuemu_kernel_sources DEPENDS ${outs})
  endif()
  add_dependencies(${TARGET} cuemu_kernel_sources)
endfunction()

# TARGET_asan and TARGET_tsan: TARGET's sources and first-level libraries, instrumented, for the
# GPU tests' sanitizer runs (everything below them is linked uninstrumented).
function(cuemu_sanitized_copies TARGET)
  get_target_property(sources ${TARGET} SOURCES)
  get_target_property(libs ${TARGET} LINK_LIBRARIES)
  list(REMOVE_ITEM libs cuemu)
  foreach(flavour asan tsan)
    if(NOT TARGET cuemu_${flavour})
      cuemu_runtime(cuemu_${flavour} ${flavour})
    endif()
    add_library(${TARGET}_${flavour} STATIC ${sources})
    target_link_libraries(${TARGET}_${flavour} PUBLIC ${libs})
    cuemu_device_library(${TARGET}_${flavour} ${flavour})
    get_target_property(defs ${TARGET} INTERFACE_COMPILE_DEFINITIONS)
    target_compile_definitions(${TARGET}_${flavour} INTERFACE ${defs})
  endforeach()
endfunction()
