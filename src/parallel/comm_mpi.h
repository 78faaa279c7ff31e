// Comm over MPI, the CPU backend's communicator: host-memory buffers, every operation waited for
// by the watchdog (a stuck peer aborts the job with a message instead of hanging it).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/mpi_comm_handle.h"

namespace qmpi {

class MpiComm : public Comm {
 public:
  // Collective over `comm`, which it duplicates (the caller keeps its own handle). `label` is
  // describe()'s text; host_of_world_rank[r] names world rank r's host in timeout messages;
  // timeout_s <= 0 waits forever.
  MpiComm(MPI_Comm comm, std::string label, std::vector<std::string> host_of_world_rank,
          double timeout_s);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return label_; }

  void all_reduce_sum(float* data, size_t count) override;
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void send(const void* data, size_t bytes, int peer) override;
  void recv(void* data, size_t bytes, int peer) override;
  void barrier() override;
  void send_async(std::shared_ptr<const std::vector<uint8_t>> data, int peer) override;
  void flush_sends() override;
  void allow_peer_failure(const std::vector<int>& peers) override;
  void forget_peers(const std::vector<int>& peers) override;
  ~MpiComm() override;

  MPI_Comm handle() const { return comm_.get(); }
  int world_rank_of(int rank) const { return world_ranks_[rank]; }

 private:
  // What an operation moves, turned into words only when it times out (the hot path of a small
  // all-reduce should not format strings).
  struct Op {
    const char* name;
    size_t amount;
    const char* unit;
    int root = -1;  // broadcast root, a rank of this group
  };
  // Waits for `request`; on timeout aborts the job naming `op` and `peer` (a rank of this group,
  // or -1 for a collective, which names every other member), or raises CommTimeout for a peer
  // whose failure is allowed.
  void finish(MPI_Request& request, const Op& op, int peer, MPI_Status* status = MPI_STATUS_IGNORE);
  void check_peer(int peer, const char* operation) const;

  struct PendingSend {
    std::shared_ptr<const std::vector<uint8_t>> data;
    std::vector<MPI_Request> requests;  // one per piece of at most kMaxCount bytes
    int peer;
  };
  void drop_delivered();

  std::vector<PendingSend> pending_;
  // Sends to lost peers, never completed; their bytes stay alive as long as MPI may read them.
  std::vector<PendingSend> abandoned_;
  std::vector<bool> may_fail_;  // per rank of this group
  MpiCommHandle comm_;
  std::string label_;
  std::vector<std::string> hosts_;
  std::vector<int> world_ranks_;  // world rank of each rank of this group
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 0;
};

}  // namespace qmpi
