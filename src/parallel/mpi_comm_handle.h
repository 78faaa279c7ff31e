// Owns one MPI communicator (from MPI_Comm_dup / MPI_Comm_split) and frees it, unless MPI has
// already been finalised, when the handle goes away.
#pragma once
#include <mpi.h>

#include <utility>

namespace qmpi {

class MpiCommHandle {
 public:
  MpiCommHandle() = default;
  explicit MpiCommHandle(MPI_Comm owned) : comm_(owned) {}
  ~MpiCommHandle() { reset(); }
  MpiCommHandle(MpiCommHandle&& o) noexcept : comm_(std::exchange(o.comm_, MPI_COMM_NULL)) {}
  MpiCommHandle& operator=(MpiCommHandle&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  MpiCommHandle(const MpiCommHandle&) = delete;
  MpiCommHandle& operator=(const MpiCommHandle&) = delete;

  MPI_Comm get() const { return comm_; }

 private:
  void reset() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace qmpi
