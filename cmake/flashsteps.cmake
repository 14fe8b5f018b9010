# Small helpers shared by every target of the project.

# Warnings on host code (g++ directly, and the host pass of nvcc), line info on device code
# so that Nsight Compute and compute-sanitizer can point at source lines (FS_LINEINFO; the
# machine code is the same without it, and the binaries are a quarter of the size).
function(fs_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(FS_LINEINFO)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# fs_add_step(<NN> <name> SOURCES <kernels.cu ...>)
# Declares one step: a library fa_step<NN> with its kernels and launchers (linked by the
# step's program, the tour and the tests) and the program bin/step<NN>_<name>.
function(fs_add_step number name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  set(lib fa_step${number})
  add_library(${lib} STATIC ${ARG_SOURCES})
  fs_target_defaults(${lib})
  target_link_libraries(${lib} PUBLIC fa_common)
  set_target_properties(${lib} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)

  set(exe step${number}_${name})
  add_executable(${exe} main.cpp)
  fs_target_defaults(${exe})
  target_link_libraries(${exe} PRIVATE ${lib})
  set_property(GLOBAL APPEND PROPERTY FS_STEP_LIBRARIES ${lib})
endfunction()
