// Comm over NCCL for device buffers: the TP group's all-reduce and all-gather (and broadcast,
// send/recv) on the CUDA backend.
//
// Ordering: every operation is enqueued on the legacy default stream (cudaStreamLegacy) and
// returns once enqueued. The CUDA backend's stream is a blocking stream, which the legacy
// stream waits for and which waits for it, so a collective runs after the kernels that produced
// its input and before the ones that consume its output, with no events crossing the Comm seam.
// barrier() also waits for the device.
//
// Bootstrap: collective over the group's MPI communicator. The group's first rank makes the
// NCCL unique id and broadcasts it over MPI; every rank then calls ncclCommInitRank on its
// current CUDA device (the backend selects it first). NCCL needs one GPU per rank: ranks that
// share a GPU use the staged MPI comm (comm_staged_mpi.h, --comm mpi) instead.
#pragma once
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "parallel/comm.h"
#include "parallel/mpi_comm_handle.h"

namespace qmpi {

class NcclComm : public Comm {
 public:
  // Raises Err::NcclInit when the id cannot be made or shared or the communicator not created.
  NcclComm(MPI_Comm group, std::string label);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return label_; }

  // Errors raise Err::CudaError naming the operation, the group and NCCL's last message.
  void all_reduce_sum(float* data, size_t count) override;
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void send(const void* data, size_t bytes, int peer) override;
  void recv(void* data, size_t bytes, int peer) override;
  void barrier() override;

 private:
  void check(ncclResult_t r, const char* operation) const;

  MpiCommHandle mpi_;  // a duplicate of the group, for barrier()
  std::string label_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
};

// The Mesh's CommFactory for the TP group on the CUDA backend.
std::unique_ptr<Comm> make_nccl_comm(MPI_Comm group, const std::string& label);

}  // namespace qmpi
