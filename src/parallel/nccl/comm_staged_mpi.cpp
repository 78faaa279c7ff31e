#include "parallel/nccl/comm_staged_mpi.h"

#include <cuda_runtime_api.h>

#include <numeric>
#include <vector>

#include "backend/cuda/cuda_errors.h"
#include "parallel/comm_mpi.h"
#include "parallel/gather_strings.h"

namespace qmpi {

using cuda::check_cuda;

StagedMpiComm::StagedMpiComm(std::unique_ptr<Comm> host_comm) : host_(std::move(host_comm)) {}

std::string StagedMpiComm::describe() const {
  return host_->describe() + " (device buffers staged through host memory)";
}

void* StagedMpiComm::to_host(cuda::PinnedBuffer& staging, const void* device, size_t bytes) {
  void* host = staging.reserve(bytes);
  check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy),
             "cudaMemcpyAsync (staging device to host)");
  check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (staging)");
  return host;
}

void StagedMpiComm::to_device(void* device, const void* host, size_t bytes) {
  check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy),
             "cudaMemcpyAsync (staging host to device)");
  check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (staging)");
}

void StagedMpiComm::all_reduce_sum(float* data, size_t count) {
  if (count == 0) return;
  const size_t bytes = count * sizeof(float);
  auto* h = static_cast<float*>(to_host(send_, data, bytes));
  host_->all_reduce_sum(h, count);
  to_device(data, h, bytes);
}

void StagedMpiComm::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  if (bytes_per_rank == 0) return;
  const size_t total = bytes_per_rank * size_t(size());
  const void* h_send = to_host(send_, send, bytes_per_rank);
  void* h_recv = recv_.reserve(total);
  host_->all_gather(h_send, h_recv, bytes_per_rank);
  to_device(recv, h_recv, total);
}

void StagedMpiComm::broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return;
  void* h = rank() == root ? to_host(send_, data, bytes) : send_.reserve(bytes);
  host_->broadcast(h, bytes, root);
  if (rank() != root) to_device(data, h, bytes);
}

void StagedMpiComm::send(const void* data, size_t bytes, int peer) {
  if (bytes == 0) return;
  host_->send(to_host(send_, data, bytes), bytes, peer);
}

void StagedMpiComm::recv(void* data, size_t bytes, int peer) {
  if (bytes == 0) return;
  void* h = recv_.reserve(bytes);
  host_->recv(h, bytes, peer);
  to_device(data, h, bytes);
}

std::unique_ptr<Comm> make_staged_mpi_comm(MPI_Comm group, const std::string& label,
                                           double timeout_s) {
  // MpiComm names hosts in its timeout messages, indexed by world rank.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  const std::vector<std::string> names = all_gather_strings(group, std::string(name, size_t(len)));
  int world_size = 0, group_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_size(group, &group_size);
  MPI_Group g = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(group, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(group_size)), world_ranks(ranks.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  MPI_Group_translate_ranks(g, group_size, ranks.data(), world, world_ranks.data());
  MPI_Group_free(&g);
  MPI_Group_free(&world);
  std::vector<std::string> hosts(size_t(world_size), "?");
  for (int r = 0; r < group_size; ++r) hosts[size_t(world_ranks[r])] = names[size_t(r)];
  return std::make_unique<StagedMpiComm>(
      std::make_unique<MpiComm>(group, label, std::move(hosts), timeout_s));
}

}  // namespace qmpi
