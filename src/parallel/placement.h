// Where every world rank runs and what it computes: the pure part of the Mesh (no MPI), so the
// mapping rules can be tested with made-up hosts.
//
// Rank order is replica-major, then pp-major: world_rank = replica * tp * pp + stage * tp +
// tp_rank. With hosts filled in rank order (mpirun --map-by slot, Slurm block distribution) a TP
// group then sits on one host, the pipeline stages of a host are contiguous, and a replica spans
// the fewest hosts.
#pragma once
#include <string>
#include <vector>

#include "parallel/layout.h"
#include "parallel/topology.h"

namespace qmpi {

struct Placement {
  int rank = 0;
  std::string host;
  int host_index = 0;
  int local_rank = 0;
  std::string device;     // DeviceChoice::label
  int device_index = -1;  // CUDA ordinal, -1 on CPU
  int stage = 0;
  int tp_rank = 0;
  Range layers;
  int replica = 0;  // data-parallel replica (--dp)
};

// Throws Error(WorldSize) when `world_size` != dp * tp * pp, with the arithmetic and a layout of
// the same rank count that runs the model (when one exists).
void check_world_size(const ModelFit& fit, const Layout& layout, int world_size);

// One placement per world rank; `hosts` and `devices` are indexed by world rank and must hold
// dp * tp * pp entries. The layout must already pass check_layout.
std::vector<Placement> place_ranks(const ModelFit& fit, const Layout& layout,
                                   const std::vector<HostSlot>& hosts,
                                   const std::vector<DeviceChoice>& devices);

// Throws Error(TpSpansHosts) when a TP group spans hosts, naming the group, its hosts and a
// layout that keeps TP groups inside hosts; with `allow_tp_across_hosts` that becomes a warning.
// Returns the warnings (also: a host whose pipeline stages are not contiguous).
std::vector<std::string> check_placement(const ModelFit& fit, const Layout& layout,
                                         const std::vector<Placement>& placements,
                                         bool allow_tp_across_hosts);

// The start-up table, one line per rank: rank, host, device, (replica,) stage, tp rank, layers.
// The replica column appears when there is more than one.
std::string mapping_table(const std::vector<Placement>& placements);

}  // namespace qmpi
