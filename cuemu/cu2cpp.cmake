# cmake -DIN=kernel.cu -DOUT=kernel.cpp -P cu2cpp.cmake
# The only source rewrite the emulated device needs (the kernels themselves stay as they are):
#   K<<<grid, block, smem, stream>>>(args)  ->  K ^ ::cuemu::launch_config(grid, block, smem, stream)(args)
#   extern __shared__ T name[];              ->  T* name = ::cuemu::dynamic_shared<T>();
# A #line directive keeps compiler errors, sanitizer reports and launch sites pointing at the .cu.
file(READ "${IN}" text)
string(REPLACE "<<<" " ^ ::cuemu::launch_config(" text "${text}")
string(REPLACE ">>>(" ")(" text "${text}")
string(REGEX REPLACE
  "extern[ \t]+__shared__[ \t]+([A-Za-z_][A-Za-z0-9_:<>]*)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\[[ \t]*\\][ \t]*;"
  "\\1* \\2 = ::cuemu::dynamic_shared<\\1>();" text "${text}")
if(text MATCHES "<<<|>>>")
  message(FATAL_ERROR "${IN}: a kernel launch cu2cpp.cmake cannot rewrite (keep '>>>(' together)")
endif()
set(out "#line 1 \"${IN}\"\n${text}")
# Only rewrite OUT when it changes, so that an unchanged kernel is not recompiled.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL out)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${out}")
