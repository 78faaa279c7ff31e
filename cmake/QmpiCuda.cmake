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

# The CUDA halves of three layers: device kernels, the CUDA backend, NCCL comms. Each is its
# folder's library; QMPI_CUDA_LIBS is what the layers above link when CUDA is on.
function(qmpi_cuda_area name dir pattern)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/${pattern})
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}
                             ${NCCL_INCLUDE_DIR})
  target_link_libraries(${name} PUBLIC ${ARGN})
  target_compile_definitions(${name} PUBLIC QMPI_WITH_CUDA=1)
  set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--threads 2 -O3>)
endfunction()
# Never link libcuda (the driver stub would make the binary fail to start without a driver).
qmpi_cuda_area(qmpi_kernels_cuda kernels/cuda *.cu qmpi_core CUDA::cudart)
# cuBLAS is opened when a CUDA backend first needs it (backend/cuda/cublas_library.h), not linked:
# its cuBLASLt's start-up would cost every qmpi process, CPU runs included, about 0.4 s of CPU.
qmpi_cuda_area(qmpi_backend_cuda src/backend/cuda *.cpp qmpi_backend qmpi_kernels_cuda CUDA::cudart
               ${CMAKE_DL_LIBS})
qmpi_cuda_area(qmpi_parallel_nccl src/parallel/nccl *.cpp qmpi_parallel qmpi_backend_cuda ${NCCL_LIBRARY})
set(QMPI_CUDA_LIBS qmpi_backend_cuda qmpi_parallel_nccl)
