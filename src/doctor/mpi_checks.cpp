#include "doctor/mpi_checks.h"

#include <mpi.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/errors.h"
#include "model/shard_plan.h"
#include "parallel/placement.h"

namespace qmpi::doctor {
std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, size_t(std::max(len, 0)));
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return s + " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

Layout default_layout(const std::vector<HostSlot>& slots, const ModelConfig* cfg) {
  const int world = int(slots.size());
  int per_host = 0;
  for (const HostSlot& s : slots) per_host = std::gcd(per_host, s.local_size);
  per_host = std::max(per_host, 1);
  if (cfg) {
    for (const Layout& l : valid_layouts(*cfg, world))  // widest TP first
      if (per_host % l.tp == 0) return l;
  }
  return Layout{per_host, world / per_host, {}};
}

std::string ranks_per_host(const std::vector<HostSlot>& slots) {
  std::map<int, std::pair<std::string, std::vector<int>>> hosts;
  for (size_t r = 0; r < slots.size(); ++r) {
    auto& h = hosts[slots[r].host_index];
    h.first = slots[r].host;
    h.second.push_back(int(r));
  }
  std::string out;
  for (const auto& [index, h] : hosts) {
    const auto& ranks = h.second;
    const bool contiguous = ranks.back() - ranks.front() + 1 == int(ranks.size());
    std::string list;
    if (contiguous) {
      list = ranks.size() == 1 ? std::to_string(ranks[0])
                               : std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
    } else {
      for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
    }
    out += (out.empty() ? "" : "; ") + h.first + ": " + std::to_string(ranks.size()) +
           (ranks.size() == 1 ? " rank (" : " ranks (") + list + ")";
  }
  return out;
}

std::vector<Finding> mpi_findings(const std::string& library, const std::vector<HostSlot>& slots) {
  std::set<int> hosts;
  for (const HostSlot& s : slots) hosts.insert(s.host_index);
  return {ok("mpi", "MPI library: " + library),
          ok("mpi", "world: " + std::to_string(slots.size()) + " rank(s) on " +
                        std::to_string(hosts.size()) + " host(s): " + ranks_per_host(slots))};
}

// How `layout` splits the model: heads and MLP columns per TP rank (a range when uneven), the
// KV-head copies, the layers per stage; or why it cannot.
Finding split_finding(const ModelConfig& cfg, const Layout& layout, const std::string& lt) {
  try {
    check_layout(cfg, layout);
    // An uneven split gives ranks different counts; name the range and the KV-head copies.
    int64_t q_min = cfg.num_heads, q_max = 0, kv_min = cfg.num_kv_heads, kv_max = 0;
    int64_t im_min = cfg.intermediate_size, im_max = 0, kv_copies = 0;
    for (int r = 0; r < layout.tp; ++r) {
      const ShardPlan p = make_shard_plan(cfg, layout, r);
      q_min = std::min(q_min, p.q_heads.size());
      q_max = std::max(q_max, p.q_heads.size());
      kv_min = std::min(kv_min, p.kv_heads.size());
      kv_max = std::max(kv_max, p.kv_heads.size());
      im_min = std::min(im_min, p.intermediate.size());
      im_max = std::max(im_max, p.intermediate.size());
      kv_copies += p.kv_heads.size();
    }
    auto span = [](int64_t lo, int64_t hi) {
      return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
    };
    std::string stages;
    for (int n : split_layers(int(cfg.num_layers), layout.pp, layout.pp_layers))
      stages += (stages.empty() ? "" : ",") + std::to_string(n);
    return ok("mpi", lt + " can split the model: " + span(q_min, q_max) + " query and " +
                         span(kv_min, kv_max) + " KV heads, " + span(im_min, im_max) +
                         " MLP columns per TP rank (" + std::to_string(kv_copies) +
                         " KV-head copies of " + std::to_string(cfg.num_kv_heads) +
                         "); layers per stage " + stages);
  } catch (const Error& e) {
    return fail("mpi", e);
  }
}

std::vector<Finding> layout_findings(const Layout& layout, bool chosen_by_default,
                                     const std::vector<HostSlot>& slots, const ModelConfig* cfg) {
  std::vector<Finding> out;
  const int world = int(slots.size());
  const int ranks = layout.world_ranks();
  const std::string lt = layout_flags(layout);
  if (chosen_by_default)
    out.push_back(ok("mpi", "no --tp/--pp given: checking " + lt +
                                " (TP as wide as the ranks of every host allow" +
                                (cfg ? " and the model can split" : "") +
                                ", stages for the rest)"));
  if (world == 1 && ranks > 1) {
    out.push_back(ok("mpi", "single process: " + lt +
                                " is checked on paper (layout, memory); run "
                                "`mpirun -np " +
                                std::to_string(ranks) + " qmpi doctor " + lt +
                                "` to test its communication"));
  } else if (world != ranks) {
    try {
      if (!cfg)
        raise(Err::WorldSize, "mpirun started " + std::to_string(world) + " ranks but " + lt +
                                  " needs " + std::to_string(ranks));
      check_world_size(model_fit(*cfg), layout, world);
    } catch (const Error& e) {
      out.push_back(fail("mpi", e));
    }
  }
  if (cfg) out.push_back(split_finding(*cfg, layout, lt));
  if (world > 1 && world == ranks) {
    std::vector<std::string> spanning;
    for (int s = 0; s < layout.dp * layout.pp; ++s) {  // replica * pp + stage
      std::set<std::string> hosts;
      for (int t = 0; t < layout.tp; ++t) hosts.insert(slots[size_t(s * layout.tp + t)].host);
      if (hosts.size() > 1) {
        std::string names;
        for (const auto& h : hosts) names += (names.empty() ? "" : ", ") + h;
        spanning.push_back("TP group " + std::to_string(s) + " (world ranks " +
                           std::to_string(s * layout.tp) + "-" +
                           std::to_string(s * layout.tp + layout.tp - 1) + ") spans " + names);
      }
    }
    if (spanning.empty()) {
      out.push_back(ok("mpi", "every TP group of " + lt + " is on one host"));
    } else {
      std::string msg;
      for (const auto& s : spanning) msg += (msg.empty() ? "" : "; ") + s;
      out.push_back(fail("mpi", Err::TpSpansHosts, msg));
    }
  }
  return out;
}

}  // namespace qmpi::doctor
