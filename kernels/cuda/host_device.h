// Lets a header of plain inline functions be shared by nvcc device code and host-only .cpp files
// (and their tests), so both sides compute launch shapes and cache offsets the same way.
#pragma once

#if defined(__CUDACC__)
#define QMPI_HD __host__ __device__
#else
#define QMPI_HD
#endif
