// The Comm seam: the collectives and point-to-point calls the engine needs, on one group.
// MPI (CPU backend) and NCCL (CUDA backend) implement it. Data pointers are backend memory.
// Every call is made from the rank's main thread only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qmpi {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A short label for logs and timeout messages, e.g. "tp group 1 (world ranks 2,3)".
  virtual std::string describe() const = 0;

  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // recv holds size() * bytes_per_rank bytes, rank r's part at offset r * bytes_per_rank.
  virtual void all_gather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // peer is a rank of this group.
  virtual void send(const void* data, size_t bytes, int peer) = 0;
  virtual void recv(void* data, size_t bytes, int peer) = 0;
  virtual void barrier() = 0;

  // A send of host bytes the caller need not wait for: the comm holds `data` until it is
  // delivered. A pipeline's last stage returns results this way, so that it never waits on the
  // first stage while the first stage waits on it. flush_sends() waits for all of them. The
  // default sends at once.
  virtual void send_async(std::shared_ptr<const std::vector<uint8_t>> data, int peer) {
    send(data->data(), data->size(), peer);
  }
  virtual void flush_sends() {}

  // Peers (ranks of this group) whose loss the caller survives (rank 0 and a data-parallel
  // replica): a send or receive with one of them that times out raises Error(CommTimeout)
  // instead of ending the job. forget_peers() drops the sends still on their way to lost ones.
  // The defaults: every peer's loss ends the job, nothing to drop.
  virtual void allow_peer_failure(const std::vector<int>& /*peers*/) {}
  virtual void forget_peers(const std::vector<int>& /*peers*/) {}
};

}  // namespace qmpi
