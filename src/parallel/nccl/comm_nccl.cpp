#include "parallel/nccl/comm_nccl.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_errors.h"
#include "core/errors.h"

namespace qmpi {
namespace {

// What the first rank broadcasts: the id, or the reason there is none (so no rank waits for an
// id that will never come).
struct IdMessage {
  ncclResult_t status;
  ncclUniqueId id;
};

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += " (" + std::string(last) + ")";
  return s;
}

}  // namespace

NcclComm::NcclComm(MPI_Comm group, std::string label) : label_(std::move(label)) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(group, &dup) != MPI_SUCCESS)
    raise(Err::NcclInit, "MPI_Comm_dup of " + label_ + " failed while setting up NCCL");
  mpi_ = MpiCommHandle(dup);
  MPI_Comm_rank(dup, &rank_);
  MPI_Comm_size(dup, &size_);

  IdMessage msg{};
  if (rank_ == 0) msg.status = ncclGetUniqueId(&msg.id);
  if (MPI_Bcast(&msg, sizeof msg, MPI_BYTE, 0, dup) != MPI_SUCCESS)
    raise(Err::NcclInit, "MPI_Bcast of the NCCL unique id over " + label_ + " failed");
  if (msg.status != ncclSuccess)
    raise(Err::NcclInit, "ncclGetUniqueId on the first rank of " + label_ +
                             " failed: " + ncclGetErrorString(msg.status));

  int device = -1;
  cudaGetDevice(&device);
  const ncclResult_t r = ncclCommInitRank(&comm_, size_, msg.id, rank_);
  if (r != ncclSuccess) {
    std::string fix;
    if (r == ncclInvalidUsage)
      fix =
          "NCCL needs one GPU per rank: launch at most one rank per GPU, or let ranks share "
          "GPUs with --comm mpi.";
    comm_ = nullptr;
    raise(Err::NcclInit,
          "ncclCommInitRank for rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
              " in " + label_ + " on CUDA device " + std::to_string(device) +
              " failed: " + nccl_text(r, nullptr),
          std::move(fix));
  }
}

NcclComm::~NcclComm() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclComm::check(ncclResult_t r, const char* operation) const {
  if (r != ncclSuccess)
    raise(Err::CudaError, std::string(operation) + " on " + label_ + " (rank " +
                              std::to_string(rank_) + ") failed: " + nccl_text(r, comm_));
}

void NcclComm::all_reduce_sum(float* data, size_t count) {
  if (count == 0) return;
  check(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, cudaStreamLegacy),
        "ncclAllReduce");
}

void NcclComm::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  if (bytes_per_rank == 0) return;
  check(ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm_, cudaStreamLegacy),
        "ncclAllGather");
}

void NcclComm::broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return;
  check(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, cudaStreamLegacy),
        "ncclBroadcast");
}

void NcclComm::send(const void* data, size_t bytes, int peer) {
  if (bytes == 0) return;
  check(ncclSend(data, bytes, ncclUint8, peer, comm_, cudaStreamLegacy), "ncclSend");
}

void NcclComm::recv(void* data, size_t bytes, int peer) {
  if (bytes == 0) return;
  check(ncclRecv(data, bytes, ncclUint8, peer, comm_, cudaStreamLegacy), "ncclRecv");
}

void NcclComm::barrier() {
  cuda::check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (NCCL barrier)");
  if (MPI_Barrier(mpi_.get()) != MPI_SUCCESS)
    raise(Err::CudaError, "MPI_Barrier on " + label_ + " failed");
}

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm group, const std::string& label) {
  return std::make_unique<NcclComm>(group, label);
}

}  // namespace qmpi
