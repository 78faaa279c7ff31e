// Comm for device buffers over a host MPI Comm, staging every transfer through pinned host
// memory: the `--comm mpi` mode, in which several ranks may share one GPU (NCCL refuses that),
// e.g. a whole --tp 2 --pp 3 layout on a single-GPU machine.
//
// Copies run on the legacy default stream and are waited for, so they follow the CUDA
// backend's queued work (its blocking stream) and the data is on the device again when a call
// returns. The host Comm keeps its watchdog: a stuck peer still aborts the job with a message.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "backend/cuda/cuda_handles.h"
#include "parallel/comm.h"

namespace qmpi {

class StagedMpiComm : public Comm {
 public:
  explicit StagedMpiComm(std::unique_ptr<Comm> host_comm);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string describe() const override;

  void all_reduce_sum(float* data, size_t count) override;
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void send(const void* data, size_t bytes, int peer) override;
  void recv(void* data, size_t bytes, int peer) override;
  void barrier() override { host_->barrier(); }

 private:
  void* to_host(cuda::PinnedBuffer& staging, const void* device, size_t bytes);
  void to_device(void* device, const void* host, size_t bytes);

  std::unique_ptr<Comm> host_;
  cuda::PinnedBuffer send_, recv_;
};

// A CommFactory for the TP group (bind the timeout): an MpiComm over `group` with the job's
// watchdog deadline, wrapped in a StagedMpiComm. Collective over `group`.
std::unique_ptr<Comm> make_staged_mpi_comm(MPI_Comm group, const std::string& label,
                                           double timeout_s);

}  // namespace qmpi
