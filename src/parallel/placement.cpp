#include "parallel/placement.h"

#include <algorithm>
#include <set>

#include "core/errors.h"

namespace qmpi {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(ranks[i]);
  }
  return s;
}

// True when every group of `tp` consecutive ranks sits on one host.
bool tp_groups_stay_on_hosts(const std::vector<Placement>& p, int tp) {
  for (size_t r = 0; r < p.size(); ++r)
    if (p[r].host_index != p[r - r % tp].host_index) return false;
  return true;
}

bool hosts_filled_in_rank_order(const std::vector<Placement>& p) {
  for (size_t r = 1; r < p.size(); ++r)
    if (p[r].host_index < p[r - 1].host_index) return false;
  return true;
}

// `group` counts TP groups over the whole world: replica * pp + stage.
std::string describe_spanning_group(const std::vector<Placement>& p, int tp, int group) {
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranks;
  for (int r = group * tp; r < (group + 1) * tp; ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), p[r].host);
    if (it == hosts.end()) {
      hosts.push_back(p[r].host);
      ranks.emplace_back();
      it = hosts.end() - 1;
    }
    ranks[it - hosts.begin()].push_back(r);
  }
  const Placement& first = p[size_t(group * tp)];
  const std::string replica = first.replica > 0 || p.back().replica > 0
                                  ? "replica " + std::to_string(first.replica) + " "
                                  : std::string();
  std::string s = "the TP group of " + replica + "stage " + std::to_string(first.stage) +
                  " (world ranks " + std::to_string(group * tp) + "-" +
                  std::to_string((group + 1) * tp - 1) + ") spans " + std::to_string(hosts.size()) +
                  " hosts: ";
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (h) s += ", ";
    s += hosts[h] + " (ranks " + rank_list(ranks[h]) + ")";
  }
  return s;
}

}  // namespace

void check_world_size(const ModelFit& fit, const Layout& layout, int world_size) {
  const int want = layout.world_ranks();
  if (want == world_size) return;
  std::vector<Layout> ok = fit.valid_layouts(world_size);
  std::string fix;
  if (!ok.empty()) {
    fix = "Use " + layout_flags(ok[0]) + " for " + std::to_string(world_size) + " ranks";
    if (ok.size() > 1) {
      fix += " (also valid:";
      for (size_t i = 1; i < ok.size(); ++i) {
        fix += i > 1 ? ", " : " ";
        fix += layout_flags(ok[i]);
      }
      fix += ")";
    }
    fix += ", or launch with mpirun -np " + std::to_string(want) + ".";
  } else {
    fix = "Launch with mpirun -np " + std::to_string(want) + "; no --tp x --pp layout of " +
          std::to_string(world_size) + " ranks runs this model.";
  }
  raise(Err::WorldSize,
        std::to_string(world_size) + " rank" + (world_size == 1 ? "" : "s") + " cannot form " +
            layout_flags(layout) + " (" + std::to_string(want) + " rank" + (want == 1 ? "" : "s") +
            ")",
        fix);
}

std::vector<Placement> place_ranks(const ModelFit& fit, const Layout& layout,
                                   const std::vector<HostSlot>& hosts,
                                   const std::vector<DeviceChoice>& devices) {
  const int n = layout.world_ranks();
  if (int(hosts.size()) != n || int(devices.size()) != n)
    raise(Err::Internal, "placement got " + std::to_string(hosts.size()) + " hosts and " +
                             std::to_string(devices.size()) + " devices for " + std::to_string(n) +
                             " ranks");
  const std::vector<Range> stage_layers = fit.stage_layers(layout);
  std::vector<Placement> out(n);
  for (int r = 0; r < n; ++r) {
    const int local = r % layout.replica_ranks();
    const int stage = local / layout.tp;
    out[r] = Placement{r,
                       hosts[r].host,
                       hosts[r].host_index,
                       hosts[r].local_rank,
                       devices[r].label,
                       devices[r].index,
                       stage,
                       local % layout.tp,
                       stage_layers.at(stage),
                       r / layout.replica_ranks()};
  }
  return out;
}

std::vector<std::string> check_placement(const ModelFit& fit, const Layout& layout,
                                         const std::vector<Placement>& placements,
                                         bool allow_tp_across_hosts) {
  std::vector<std::string> warnings;
  const int tp = layout.tp;
  const bool rank_order = hosts_filled_in_rank_order(placements);

  std::vector<int> spanning;  // TP groups, counted over all replicas
  const int groups = int(placements.size()) / tp;
  for (int g = 0; g < groups; ++g)
    for (int r = g * tp; r < (g + 1) * tp; ++r)
      if (placements[r].host_index != placements[g * tp].host_index) {
        spanning.push_back(g);
        break;
      }
  if (!spanning.empty()) {
    std::string msg = describe_spanning_group(placements, tp, spanning[0]);
    if (spanning.size() > 1)
      msg += " (" + std::to_string(spanning.size()) + " of " + std::to_string(groups) +
             " TP groups cross hosts)";
    if (allow_tp_across_hosts) {
      warnings.push_back(msg +
                         "; every layer all-reduces across the network, expect it to be slow");
    } else {
      std::vector<Layout> fits;
      for (Layout l : fit.valid_layouts(layout.replica_ranks()))
        if (l.tp != tp && tp_groups_stay_on_hosts(placements, l.tp)) {
          l.dp = layout.dp;
          fits.push_back(l);
        }
      std::string fix;
      if (!fits.empty()) {
        fix = "Use " + layout_flags(fits[0]);
        for (size_t i = 1; i < fits.size(); ++i) fix += " or " + layout_flags(fits[i]);
        fix += " so that every TP group stays on one host.";
      }
      if (!rank_order)
        fix += std::string(fix.empty() ? "" : " ") +
               "Fill hosts in rank order (mpirun --map-by slot, Slurm --distribution=block) so "
               "that consecutive ranks share a host.";
      if (fix.empty())
        fix = "Use a --tp no larger than the ranks of the smallest host, with more --pp.";
      raise(Err::TpSpansHosts, msg, fix);
    }
  }

  // Stages counted over all replicas (replica * pp + stage), so that a host ending one replica
  // and starting the next is still contiguous.
  std::vector<std::set<int>> stages_of_host;
  for (const Placement& p : placements) {
    if (p.host_index >= int(stages_of_host.size())) stages_of_host.resize(p.host_index + 1);
    stages_of_host[p.host_index].insert(p.replica * layout.pp + p.stage);
  }
  for (const Placement& p : placements) {
    const std::set<int>& st = stages_of_host[p.host_index];
    if (*st.rbegin() - *st.begin() + 1 == int(st.size()) || p.local_rank != 0) continue;
    std::vector<int> list(st.begin(), st.end());
    warnings.push_back("host " + p.host + " holds pipeline stages " + rank_list(list) +
                       " that are not contiguous, so activations cross hosts more often than "
                       "needed; fill hosts in rank order (mpirun --map-by slot)");
  }
  return warnings;
}

std::string mapping_table(const std::vector<Placement>& placements) {
  const bool replicas = !placements.empty() && placements.back().replica > 0;
  std::vector<std::vector<std::string>> rows{{"rank", "host", "device", "stage", "tp", "layers"}};
  if (replicas) rows[0].insert(rows[0].begin() + 3, "replica");
  for (const Placement& p : placements) {
    rows.push_back({std::to_string(p.rank), p.host, p.device, std::to_string(p.stage),
                    std::to_string(p.tp_rank),
                    std::to_string(p.layers.begin) + "-" + std::to_string(p.layers.end - 1) + " (" +
                        std::to_string(p.layers.size()) + ")"});
    if (replicas) rows.back().insert(rows.back().begin() + 3, std::to_string(p.replica));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace qmpi
