#include "parallel/mesh.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <numeric>
#include <sstream>

#include "core/errors.h"
#include "parallel/comm_mpi.h"
#include "parallel/gather_strings.h"
#include "parallel/replica_survival.h"

namespace qmpi {
namespace {

// Every rank's device choice, on every rank. A rank whose choice failed (its own
// CUDA_VISIBLE_DEVICES) makes all ranks raise that rank's error, so none waits for it.
std::vector<DeviceChoice> gather_devices(const HostSlot& me, const ParallelConfig& options) {
  std::string mine;
  try {
    DeviceChoice d =
        choose_device(options.cuda, me.local_rank, me.local_size,
                      std::getenv("CUDA_VISIBLE_DEVICES"), options.allow_device_sharing, me.host);
    mine = "ok\t" + std::to_string(d.index) + "\t" + d.label;
  } catch (const Error& e) {
    mine = "err\t" + std::to_string(int(e.code())) + "\t" + e.message() + "\t" + e.fix();
  }
  std::vector<DeviceChoice> out;
  for (const std::string& s : all_gather_strings(MPI_COMM_WORLD, mine)) {
    std::vector<std::string> f;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, '\t');) f.push_back(part);
    if (f.size() == 4 && f[0] == "err") raise(Err(std::stoi(f[1])), f[2], f[3]);
    if (f.size() != 3 || f[0] != "ok") raise(Err::Internal, "bad device record \"" + s + "\"");
    out.push_back(DeviceChoice{std::stoi(f[1]), f[2]});
  }
  return out;
}

// Each world rank's host as timeout messages name it; with replicas, its replica too, so that a
// replica that stops answering is named ("rank 4 (host h1, replica 1)").
std::vector<std::string> host_names(const std::vector<Placement>& placements, int dp) {
  std::vector<std::string> out;
  for (const Placement& p : placements)
    out.push_back(dp > 1 ? p.host + ", replica " + std::to_string(p.replica) : p.host);
  return out;
}

}  // namespace

Mesh::Mesh(MpiRuntime& mpi, const ModelFit& fit, const ParallelConfig& options,
           CommFactory tp_comm_factory)
    : rank_(mpi.rank()), layout_(options.layout) {
  check_world_size(fit, layout_, mpi.size());
  fit.check_layout(layout_);

  std::vector<HostSlot> hosts = discover_hosts(MPI_COMM_WORLD);
  std::vector<DeviceChoice> devices = gather_devices(hosts[rank_], options);
  placements_ = place_ranks(fit, layout_, hosts, devices);
  std::vector<std::string> warnings =
      check_placement(fit, layout_, placements_, options.allow_tp_across_hosts);

  const std::vector<std::string> names = host_names(placements_, layout_.dp);
  // Rank 0 waits on every other rank, and the others mostly on rank 0: they wait twice as long,
  // so that rank 0 is the one that reports a failure and answers its clients first.
  const double timeout = rank_ == 0 ? options.comm_timeout_s : 2 * options.comm_timeout_s;
  world_ = std::make_unique<MpiComm>(MPI_COMM_WORLD, "world", names, timeout);
  if (layout_.dp > 1 && replica_survival_enabled()) {
    if (rank_ == 0) {
      std::vector<int> others(size_t(size() - replica_base(1)));
      std::iota(others.begin(), others.end(), replica_base(1));
      world_->allow_peer_failure(others);
    }
    set_fail_alone(replica() > 0);
  }
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, replica(), replica_rank(), &split);
  replica_comm_ =
      std::make_unique<MpiComm>(split,
                                "replica " + std::to_string(replica()) + " (world ranks " +
                                    std::to_string(replica_base(replica())) + "-" +
                                    std::to_string(replica_base(replica() + 1) - 1) + ")",
                                names, timeout);
  MPI_Comm_free(&split);
  // One TP group per stage of every replica; NCCL communicators are built from this split too.
  MPI_Comm_split(MPI_COMM_WORLD, replica() * pp() + stage(), tp_rank(), &split);
  tp_split_ = MpiCommHandle(split);
  if (tp_comm_factory)
    tp_ = tp_comm_factory(tp_split_.get(), tp_label());
  else
    tp_ = std::make_unique<MpiComm>(tp_split_.get(), tp_label(), names, timeout);

  if (rank_ == 0) {
    spdlog::info("mesh ({}):\n{}", layout_flags(layout_), mapping_table());
    for (const std::string& w : warnings) spdlog::warn("WARNING mesh: {}", w);
  }
}

void Mesh::replace_tp_comm(const CommFactory& factory) {
  tp_.reset();
  tp_ = factory(tp_split_.get(), tp_label());
}

std::string Mesh::tp_label() const {
  const int first = replica_base(replica()) + stage() * tp();
  const std::string replica_words =
      dp() > 1 ? "replica " + std::to_string(replica()) + " " : std::string();
  return "tp group " + replica_words + std::to_string(stage()) + " (world ranks " +
         std::to_string(first) + "-" + std::to_string(first + tp() - 1) + ")";
}

std::string Mesh::log_tag() const {
  const int d = device_index();
  return "rank " + std::to_string(rank_) + " " +
         (dp() > 1 ? "replica " + std::to_string(replica()) + " " : std::string()) + host() + ":" +
         (d < 0 ? std::string("cpu") : "cuda:" + std::to_string(d));
}

}  // namespace qmpi
