// The pipeline's transport: what travels between ranks in a step, and nothing else. Plans go
// point to point (rank 0 -> the first stage's other TP ranks, each rank -> the same TP rank of
// the next stage), hidden states from a stage to the next, and the last stage's result back to
// rank 0. With data-parallel replicas rank 0 drives every replica: it sends each replica's plans
// to that replica's first stage and gets its results from that replica's last stage. Plans and
// results are sent without waiting; hidden states with a blocking send, which is the pipeline's
// back-pressure. Every message is a byte string whose 8-byte length goes first.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "parallel/comm.h"

namespace qmpi {

struct MeshPosition {
  int rank = 0;
  int tp_rank = 0;
  int stage = 0;
  int pp = 1;
  int tp = 1;
  int prev_stage_rank = -1;  // world rank of the same TP rank on the previous stage
  int next_stage_rank = -1;
  int result_rank = 0;  // world rank of TP rank 0 on the last stage of this rank's replica
  int dp = 1;           // data-parallel replicas, each of pp * tp ranks (replica-major)

  bool last_stage() const { return stage + 1 == pp; }
  int replica_base(int replica) const { return replica * pp * tp; }
  int replica_result_rank(int replica) const { return replica_base(replica) + (pp - 1) * tp; }
};

class StageLink {
 public:
  // `world` is the world comm; `backend` says whether hidden states live in host memory (device
  // backends stage them through a host buffer, as MPI needs host memory).
  StageLink(const MeshPosition& pos, Comm& world, Backend& backend);

  // Passes an encoded plan on: from rank 0 to the first stage's other TP ranks, and from every
  // rank to the same TP rank of the next stage.
  void send_plan(std::vector<uint8_t> bytes);
  std::vector<uint8_t> recv_plan();  // from rank 0 (first stage) or the previous stage

  void send_hidden(const float* hidden, size_t bytes);  // to the next stage
  void recv_hidden(float* hidden, size_t bytes);        // from the previous stage

  void send_result(std::vector<uint8_t> bytes);  // the result rank, to rank 0
  std::vector<uint8_t> recv_result();            // rank 0, from the result rank

  // Rank 0: a plan for replica `replica`'s first stage (every TP rank of it), and that replica's
  // result. Replica 0 is rank 0's own and goes through send_plan / recv_result.
  void send_plan_to_replica(std::vector<uint8_t> bytes, int replica);
  std::vector<uint8_t> recv_result_from_replica(int replica);
  // Rank 0, a replica lost: drops the messages still on their way to its ranks.
  void forget_replica(int replica);

  void flush() { world_.flush_sends(); }

 private:
  void send_message(std::vector<uint8_t> bytes, const std::vector<int>& to);
  std::vector<uint8_t> recv_message(int from);

  MeshPosition pos_;
  Comm& world_;
  Backend& be_;
  std::vector<uint8_t> staging_;
};

}  // namespace qmpi
