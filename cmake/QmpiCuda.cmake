# The CUDA backend builds whenever nvcc exists (QMPI_CUDA=AUTO) and never blocks a CPU build.
set(QMPI_HAVE_CUDA OFF)
if(NOT QMPI_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(QMPI_HAVE_CUDA ON)
  elseif(QMPI_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QMPI_CUDA=ON but no nvcc was found")
  endif()
endif()

if(NOT QMPI_HAVE_CUDA)
  message(STATUS "qmpi: nvcc not found, building the CPU backend only")
  return()
endif()

set(CMAKE_CUDA_ARCHITECTURES ${QMPI_CUDA_ARCHS})
enable_language(CUDA)
# CMake 3.25 does not know nvcc's C++20 flag yet.
if(CMAKE_VERSION VERSION_LESS 3.26)
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
message(STATUS "qmpi: CUDA backend ON (archs ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY})")

file(GLOB QMPI_CUDA_SRCS CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.cu
     ${CMAKE_CURRENT_SOURCE_DIR}/src/backend/cuda/*.cpp
     ${CMAKE_CURRENT_SOURCE_DIR}/src/dist/nccl/*.cpp)
add_library(qmpi_cuda STATIC ${QMPI_CUDA_SRCS})
target_include_directories(qmpi_cuda PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}
                           ${NCCL_INCLUDE_DIR})
# Never link libcuda (the driver stub would make the binary fail to start without a driver).
target_link_libraries(qmpi_cuda PUBLIC qmpi_dist qmpi_kernels CUDA::cudart CUDA::cublas CUDA::cublasLt
                      ${NCCL_LIBRARY})
target_compile_definitions(qmpi_cuda PUBLIC QMPI_WITH_CUDA=1)
set_target_properties(qmpi_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
target_compile_options(qmpi_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--threads 2 -O3>)
