#include "parallel/gather_strings.h"

namespace qmpi {

std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int len = int(mine.size());
  std::vector<int> lens(size), offsets(size);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += lens[r];
  }
  std::string all(total, '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                 comm);
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r] = all.substr(offsets[r], lens[r]);
  return out;
}

std::string broadcast_string(MPI_Comm comm, const std::string& value, int root) {
  int len = int(value.size());
  MPI_Bcast(&len, 1, MPI_INT, root, comm);
  std::string out = value;
  out.resize(len);
  MPI_Bcast(out.data(), len, MPI_CHAR, root, comm);
  return out;
}

}  // namespace qmpi
