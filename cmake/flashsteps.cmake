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

# The steps, in order, and the steps each builds on (its library links theirs): FS_STEPS
# (-DFS_STEPS="01;04", or a preset of CMakePresets.json) builds a choice of them, with what they
# build on, and the tests of what is built; empty, every step. fs_resolve_steps() sets
# FS_ENABLED_STEPS (numbers, in order) for the rest of the configuration.
set(FS_ALL_STEPS 01 02 03 04 05 06 07 08 09 10)
set(FS_STEP_NEEDS_02 01)  # O = PV, dV, dQ, dK are step 01's kernels
set(FS_STEP_NEEDS_05 04)  # the forward without dropout is step 04's
set(FS_STEP_NEEDS_06 05)  # the backward's tiles and IO walk are step 05's
set(FS_STEP_NEEDS_07 05)  # the backward's preprocess and tile shapes are step 05's
set(FS_STEP_NEEDS_10 08)  # the tensor-core helpers (mma.sync, ldmatrix, the tiles, the softmax) are step 08's

function(fs_resolve_steps)
  set(wanted)
  foreach(s IN LISTS FS_STEPS)
    string(STRIP "${s}" s)
    if(s MATCHES "^[1-9]$")
      set(s "0${s}")
    endif()
    if(NOT s IN_LIST FS_ALL_STEPS)
      message(FATAL_ERROR "FS_STEPS: '${s}' is not a step (01 ... 10)")
    endif()
    list(APPEND wanted ${s})
  endforeach()
  if(NOT wanted)
    set(wanted ${FS_ALL_STEPS})
  endif()
  # What the wanted steps build on, transitively (each step needs only earlier ones).
  set(reversed ${FS_ALL_STEPS})
  list(REVERSE reversed)
  foreach(s IN LISTS reversed)
    if(s IN_LIST wanted)
      list(APPEND wanted ${FS_STEP_NEEDS_${s}})
    endif()
  endforeach()
  set(enabled)
  foreach(s IN LISTS reversed)
    if(s IN_LIST wanted)
      list(PREPEND enabled ${s})
    endif()
  endforeach()
  set(FS_ENABLED_STEPS ${enabled} PARENT_SCOPE)
  list(JOIN enabled ", " shown)
  if(FS_STEPS)
    message(STATUS "flashsteps: steps ${shown} (FS_STEPS=${FS_STEPS})")
  endif()
endfunction()

# fs_have_steps(<var> NN ...): TRUE in <var> when every step named is built.
# The C++ element type of a 16-bit type's name in the generated units: fs_element_type(bf16 E)
# sets E to __nv_bfloat16, fp16 to __half.
function(fs_element_type type var)
  if(type STREQUAL bf16)
    set(${var} __nv_bfloat16 PARENT_SCOPE)
  elseif(type STREQUAL fp16)
    set(${var} __half PARENT_SCOPE)
  else()
    message(FATAL_ERROR "fs_element_type: ${type} is not bf16 or fp16")
  endif()
endfunction()

function(fs_have_steps var)
  set(${var} TRUE PARENT_SCOPE)
  foreach(s IN LISTS ARGN)
    if(NOT s IN_LIST FS_ENABLED_STEPS)
      set(${var} FALSE PARENT_SCOPE)
    endif()
  endforeach()
endfunction()
