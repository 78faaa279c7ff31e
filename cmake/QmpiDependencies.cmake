# Every dependency comes from Debian packages (scripts/setup.sh installs them).
find_package(MPI REQUIRED COMPONENTS C)
find_package(OpenMP REQUIRED COMPONENTS CXX)
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "qmpi needs parallel HDF5 (Debian: libhdf5-openmpi-dev); run scripts/setup.sh")
endif()
# program_options is compiled; Asio and Beast (the HTTP front) are header-only, and so is
# Boost.System since 1.69, so Boost::headers and the thread library are all they need.
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(Threads REQUIRED)
find_package(cppzmq REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# SHA-256 for `qmpi doctor --verify-sha256` (OpenSSL's libcrypto).
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
