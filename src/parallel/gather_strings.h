// Every rank's string, on every rank (startup only: host names, device choices).
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace qmpi {

// Collective over `comm`; result[r] is the string rank r passed.
std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& mine);

// Collective over `comm`; every rank gets `root`'s string.
std::string broadcast_string(MPI_Comm comm, const std::string& value, int root);

}  // namespace qmpi
