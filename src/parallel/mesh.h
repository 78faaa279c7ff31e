// The one mapping object of a run: every rank builds it once, right after MPI starts, and knows
// from it its host, device, pipeline stage, TP rank, shard and communicators.
//
// Rank order is replica-major, then pp-major (world_rank = replica * tp * pp + stage * tp +
// tp_rank), so with hosts filled in rank order a TP group (two all-reduces per layer) stays on one
// host, only pipeline sends cross hosts, and a data-parallel replica spans the fewest hosts.
#pragma once
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/layout.h"
#include "parallel/mpi_comm_handle.h"
#include "parallel/mpi_runtime.h"
#include "parallel/placement.h"

namespace qmpi {

// The mesh's part of the engine configuration (engine/engine_config.h): the layout and how its
// ranks may be placed and wait.
struct ParallelConfig {
  Layout layout;
  bool cuda = false;
  bool allow_device_sharing = false;   // more ranks than visible GPUs on a host (tests, --comm mpi)
  double comm_timeout_s = 300;         // watchdog deadline of every MPI operation; <= 0: none
  bool allow_tp_across_hosts = false;  // a loud warning instead of Err::TpSpansHosts
};

// Builds the TP group's Comm from the group's MPI communicator (kept alive by the Mesh) and its
// label; the NCCL backend plugs in here. The default builds an MpiComm.
using CommFactory = std::function<std::unique_ptr<Comm>(MPI_Comm group, const std::string& label)>;

class Mesh {
 public:
  // Collective over MPI_COMM_WORLD. Checks, in order: world size == dp * tp * pp (Err::WorldSize),
  // the model's layout rules (fit.check_layout), device visibility, TP groups inside hosts
  // (Err::TpSpansHosts). Every rank raises the same error, so none is left waiting. Rank 0 logs the
  // mapping table. `mpi` must outlive the Mesh.
  Mesh(MpiRuntime& mpi, const ModelFit& fit, const ParallelConfig& options,
       CommFactory tp_comm_factory = {});
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return int(placements_.size()); }
  int tp() const { return layout_.tp; }
  int pp() const { return layout_.pp; }
  const Layout& layout() const { return layout_; }
  int dp() const { return layout_.dp; }
  // This rank's data-parallel replica, its rank inside the replica (what the shard plan takes),
  // and the world rank of a replica's first rank.
  int replica() const { return rank_ / layout_.replica_ranks(); }
  int replica_rank() const { return rank_ % layout_.replica_ranks(); }
  int replica_base(int replica) const { return replica * layout_.replica_ranks(); }
  int tp_rank() const { return replica_rank() % layout_.tp; }
  int stage() const { return replica_rank() / layout_.tp; }

  // World communicator: pipeline sends/recvs use prev_stage_rank()/next_stage_rank() as peers,
  // and rank 0 drives every replica through it.
  Comm& world() { return *world_; }
  Comm& tp_group() { return *tp_; }
  // This rank's replica's ranks (the world's with one replica): the server's stop poll, which
  // a lost replica must not hold up.
  Comm& replica_group() { return *replica_comm_; }
  // Rebuilds the TP group's Comm (e.g. NCCL once the CUDA device is selected). Collective over
  // the TP group.
  void replace_tp_comm(const CommFactory& factory);
  // World rank of the same TP rank in the previous / next stage of this rank's replica, -1 at the
  // ends of the pipeline.
  int prev_stage_rank() const { return stage() > 0 ? rank_ - tp() : -1; }
  int next_stage_rank() const { return stage() + 1 < pp() ? rank_ + tp() : -1; }

  const std::vector<Placement>& placements() const { return placements_; }
  const std::string& host() const { return placements_[rank_].host; }
  const std::string& device() const { return placements_[rank_].device; }
  int device_index() const { return placements_[rank_].device_index; }
  std::string mapping_table() const { return qmpi::mapping_table(placements_); }
  // "rank 3 h2:cuda:1", for log lines.
  std::string log_tag() const;

 private:
  std::string tp_label() const;

  int rank_ = 0;
  Layout layout_;
  std::vector<Placement> placements_;
  std::unique_ptr<Comm> world_;
  std::unique_ptr<Comm> replica_comm_;
  MpiCommHandle tp_split_;  // declared before tp_: a factory's Comm may use it until destroyed
  std::unique_ptr<Comm> tp_;
};

}  // namespace qmpi
