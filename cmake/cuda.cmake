# BUILD_CUDA is ON when a CUDA compiler is found (CUDA 13 lives in /usr/local/cuda), OFF otherwise.
# Kernels must compile on machines without a GPU, so detection looks at the compiler, never a device.
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_mds_cuda_default ON)
else()
  set(_mds_cuda_default OFF)
endif()
option(BUILD_CUDA "Build CUDA kernels and GPU backends" ${_mds_cuda_default})

if(BUILD_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # CMake 3.25 does not know the C++20 flag for nvcc >= 12.
  if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # NCCL's header, for the device communicator (libcore/dist/cuda/), which opens libnccl.so.2 at
  # run time, so that programs start where NCCL is missing. The library is looked up only to say
  # which one this machine would load.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR}
                                              ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(NOT NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "BUILD_CUDA needs NCCL's nccl.h (set NCCL_INCLUDE_DIR), or configure "
                        "with -DBUILD_CUDA=OFF")
  endif()
  add_library(NCCL::headers INTERFACE IMPORTED)
  set_target_properties(NCCL::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  message(STATUS "mds: CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                 "NCCL header in ${NCCL_INCLUDE_DIR} (libnccl.so.2 is opened at run time; here: "
                 "${NCCL_LIBRARY})")
else()
  message(STATUS "mds: BUILD_CUDA=OFF (no CUDA compiler found or disabled)")
endif()
