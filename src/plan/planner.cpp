#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "core/byte_size.h"
#include "engine/kv_sizing.h"

namespace qmpi {
namespace {

int gpus_per_host(const PlanInputs& in) {
  const int nodes = std::max(in.nodes, 1);
  return (std::max(in.gpus, 1) + nodes - 1) / nodes;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

// A TP group must stay on one host: ranks are replica-major, then pp-major (rank = replica * tp *
// pp + stage * tp + tp_rank) and fill hosts in order, so the g-th TP group (g = replica * pp +
// stage) is ranks [g*tp, g*tp + tp).
bool tp_spans_hosts(const Layout& l, int per_host, std::string& reason) {
  for (int g = 0; g < l.dp * l.pp; ++g) {
    const int first = g * l.tp, last = first + l.tp - 1;
    if (first / per_host == last / per_host) continue;
    const std::string group =
        l.dp > 1 ? "replica " + std::to_string(g / l.pp) + " stage " + std::to_string(g % l.pp)
                 : "stage " + std::to_string(g);
    reason = "--tp " + std::to_string(l.tp) + " puts the TP group of " + group + " (ranks " +
             std::to_string(first) + "-" + std::to_string(last) + ") on hosts " +
             std::to_string(first / per_host) + " and " + std::to_string(last / per_host) +
             ", but with " + std::to_string(per_host) +
             " GPUs per host a TP group must divide them and stay on one host";
    return true;
  }
  return false;
}

LayoutVerdict evaluate(const ModelConfig& cfg, const Layout& layout, const PlanInputs& in,
                       const std::vector<TensorSpec>& tensors) {
  LayoutVerdict v;
  v.layout = layout;
  const int per_host = gpus_per_host(in);
  try {
    check_layout(cfg, layout);
  } catch (const Error& e) {
    v.code = e.code();
    v.reason = e.message();
    v.fix = e.fix();
    return v;
  }
  if (tp_spans_hosts(layout, per_host, v.reason)) {
    v.code = Err::TpSpansHosts;
    v.fix = "Use a --tp that divides the " + std::to_string(per_host) +
            " GPUs per host and cover the rest with --pp.";
    return v;
  }
  v.valid = true;
  const int ranks = layout.world_ranks();
  v.hosts = (ranks - 1) / per_host + 1;
  for (int rep = 0; rep < layout.dp; ++rep)
    for (int s = 0; s + 1 < layout.pp; ++s) {
      const int first = rep * layout.replica_ranks() + s * layout.tp;
      if (first / per_host != (first + layout.tp) / per_host) ++v.cross_host_hops;
    }
  v.budget = rank_budget(in, ranks);
  v.kv_room_tokens = INT64_MAX;
  bool weights_fit = true;
  // Every replica's ranks hold the same as the first one's: its ranks stand for all.
  for (int r = 0; r < layout.replica_ranks(); ++r) {
    const ShardPlan plan = make_shard_plan(cfg, layout, r);
    RankMemory m = rank_memory(cfg, plan, in, tensors);
    if (plan.stage == 0) v.kv_head_copies += plan.kv_heads.size();
    if (r == 0) v.tp_bytes_per_token = tp_bytes_per_token(cfg, layout, plan.layers.size(), true);
    // Weights and the runtime cannot shrink; the step's activations and the KV cache shrink
    // with --max-num-seqs and --max-model-len, so they are the KV error's business.
    if (m.weights + m.overhead > v.budget) weights_fit = false;
    uint64_t room = m.fixed() < v.budget ? v.budget - m.fixed() : 0;
    // The CPU engine's KV budget: --kv-cache-memory, else a share of the host's memory
    // (engine/kv_sizing.h).
    if (in.backend == BackendKind::Cpu)
      room =
          std::min(room, in.kv_cache_memory > 0 ? in.kv_cache_memory
                                                : uint64_t(kCpuKvMemoryShare * double(v.budget)));
    const int64_t tokens = m.kv_per_token ? int64_t(room / m.kv_per_token) : INT64_MAX;
    if (tokens < v.kv_room_tokens) v.tightest = r;
    v.kv_room_tokens = std::min(v.kv_room_tokens, tokens);
    v.ranks.push_back(m);
    if (m.total() > v.ranks[size_t(v.biggest)].total()) v.biggest = int(v.ranks.size()) - 1;
  }
  v.rank_kv_tokens = kv_cache_fixed(in) ? kv_cache_tokens(cfg, in) : v.kv_room_tokens;
  if (v.rank_kv_tokens != INT64_MAX)
    v.full_length_seqs = v.rank_kv_tokens / sequence_kv_tokens(cfg, in) * layout.dp;
  // Replicas add up: the job holds dp times the tokens one replica holds.
  if (v.kv_room_tokens != INT64_MAX) v.kv_room_tokens *= layout.dp;
  v.fits = v.biggest_rank().total() <= v.budget;
  if (!v.fits) v.memory_code = weights_fit ? Err::KvCacheDoesNotFit : Err::WeightsDoNotFit;
  return v;
}

std::vector<LayoutVerdict> evaluate_all(const ModelConfig& cfg, const PlanInputs& in) {
  const std::vector<TensorSpec> tensors = expected_tensors(cfg);
  std::vector<LayoutVerdict> out;
  for (int tp = 1; tp <= in.gpus; ++tp)
    for (int pp = 1; tp * pp <= in.gpus; ++pp)
      out.push_back(evaluate(cfg, {tp, pp, {}}, in, tensors));
  // Data-parallel replicas of every layout that divides the GPUs, all of them in use.
  for (int dp = 2; dp <= in.gpus; ++dp)
    for (int tp = 1; dp * tp <= in.gpus; ++tp)
      if (in.gpus % (dp * tp) == 0) {
        Layout l{tp, in.gpus / (dp * tp), {}};
        l.dp = dp;
        out.push_back(evaluate(cfg, l, in, tensors));
      }
  return out;
}

int pick_best(const std::vector<LayoutVerdict>& layouts) {
  int min_hops = INT32_MAX;
  int64_t max_room = 0;
  for (const auto& v : layouts)
    if (v.fits) min_hops = std::min(min_hops, v.cross_host_hops);
  for (const auto& v : layouts)
    if (v.fits && v.cross_host_hops == min_hops) max_room = std::max(max_room, v.kv_room_tokens);
  int best = -1;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const LayoutVerdict& v = layouts[i];
    if (!v.fits || v.cross_host_hops != min_hops ||
        double(v.kv_room_tokens) < double(max_room) * (1.0 - kKvRoomTolerance))
      continue;
    const LayoutVerdict* b = best < 0 ? nullptr : &layouts[size_t(best)];
    if (!b || std::make_tuple(v.layout.pp, v.gpus(), v.layout.tp) <
                  std::make_tuple(b->layout.pp, b->gpus(), b->layout.tp))
      best = int(i);
  }
  return best;
}

std::string percent_less(int64_t value, int64_t than) {
  return std::to_string(int64_t(std::lround(100.0 * (1.0 - double(value) / double(than))))) +
         "% less";
}

// Why `best` was picked over `other` (both valid, best fits), in the order pick_best decides.
std::string why_not(const ModelConfig& cfg, const LayoutVerdict& best, const LayoutVerdict& other) {
  std::string s = layout_flags(other.layout) + ": ";
  if (!other.fits)
    return s + "does not fit (" + error_id(other.memory_code) + " " +
           std::string(error_entry(other.memory_code).name) + ")";
  if (other.cross_host_hops > best.cross_host_hops)
    return s + std::to_string(other.cross_host_hops) +
           " pipeline hops cross hosts, the recommended layout's " +
           std::to_string(best.cross_host_hops);
  if (double(other.kv_room_tokens) < double(best.kv_room_tokens) * (1.0 - kKvRoomTolerance)) {
    const RankMemory& t = other.ranks.at(size_t(other.tightest));
    s += "room for " + with_commas(other.kv_room_tokens) + " tokens of KV cache, " +
         percent_less(other.kv_room_tokens, best.kv_room_tokens) + ": its tightest rank (rank " +
         std::to_string(t.rank) + ") holds " + std::to_string(t.kv_heads) + " of the " +
         std::to_string(cfg.num_kv_heads) + " KV heads for " + std::to_string(t.layers.size()) +
         " layers";
    if (other.kv_head_copies > cfg.num_kv_heads)
      s += " (the uneven head split holds " + std::to_string(other.kv_head_copies) +
           " KV-head copies per stage)";
    if (other.layout.dp > 1)
      s += ", and each of its " + std::to_string(other.layout.dp) +
           " replicas holds a whole copy of the weights";
    return s;
  }
  if (other.layout.pp > best.layout.pp)
    return s + "about the same KV room but " + std::to_string(other.layout.pp - best.layout.pp) +
           " more pipeline stage" + (other.layout.pp - best.layout.pp == 1 ? "" : "s") +
           " (a hop and a bubble each)";
  if (other.gpus() > best.gpus())
    return s + "about the same KV room on " + std::to_string(other.gpus() - best.gpus()) +
           " more GPU" + (other.gpus() - best.gpus() == 1 ? "" : "s");
  if (other.layout.tp > best.layout.tp && other.layout.dp < best.layout.dp)
    return s + "about the same KV room with one " + std::to_string(other.layout.tp) +
           "-way TP group per " + std::to_string(other.layout.replica_ranks()) +
           " GPUs where the recommendation runs " + std::to_string(best.layout.dp) +
           " independent replicas (no all-reduce between them): " +
           format_bytes(other.tp_bytes_per_token) + " of all-reduce per token per rank, against " +
           format_bytes(best.tp_bytes_per_token);
  if (other.layout.tp > best.layout.tp)
    return s + "about the same KV room with more all-reduce traffic: " +
           format_bytes(other.tp_bytes_per_token) + " per token per rank, against " +
           format_bytes(best.tp_bytes_per_token);
  return s +
         "about the same KV room; ranked after it on the tie-breaks (fewer stages, fewer "
         "GPUs, smaller TP)";
}

bool fits_somewhere(const ModelConfig& cfg, const PlanInputs& in) {
  return pick_best(evaluate_all(cfg, in)) >= 0;
}

std::string budget_words(const PlanInputs& in, int ranks) {
  if (in.backend == BackendKind::Cuda) {
    char util[16];
    std::snprintf(util, sizeof util, "%.2f", in.gpu_util);
    return format_gib(in.gpu_mem) + " GiB x " + util + " per GPU";
  }
  return format_gib(in.host_mem) + " GiB of host memory / " +
         std::to_string(ranks_per_host(in, ranks)) + " ranks on the host";
}

std::string kv_room_words(const ModelConfig& cfg, const LayoutVerdict& v, const PlanInputs& in) {
  const int64_t len = resolved_max_model_len(cfg, in);
  const std::string tokens = with_commas(v.rank_kv_tokens) + " tokens";
  std::string s = kv_cache_fixed(in) ? "a KV cache of " + tokens + " per rank"
                                     : "room for " + tokens + " of KV cache per rank";
  s += ": " + with_commas(v.full_length_seqs) + " sequence" + (v.full_length_seqs == 1 ? "" : "s") +
       " of " + std::to_string(len) + " tokens at once";
  if (v.layout.dp > 1) s += " over its " + std::to_string(v.layout.dp) + " replicas";
  return s;
}

std::string memory_breakdown(const RankMemory& m) {
  return "weights " + format_gib(m.weights) + ", KV cache " + format_gib(m.kv_cache) +
         ", activations " + format_gib(m.activations) + ", overhead " + format_gib(m.overhead) +
         " GiB";
}

// "6 GPUs", "12 GPUs (2 nodes of 6)"; on the CPU backend the units are ranks.
std::string gpus_words(const PlanInputs& in, int gpus, int nodes) {
  const char* unit = in.backend == BackendKind::Cuda ? " GPU" : " rank";
  std::string s = std::to_string(gpus) + unit + (gpus == 1 ? "" : "s");
  if (nodes > 1)
    s += " (" + std::to_string(nodes) + " nodes of " + std::to_string(gpus / nodes) + ")";
  return s;
}

// Largest value in [lo, hi] for which `ok` holds, given ok(lo) and monotone ok; lo - 1 if !ok(lo).
int64_t largest_ok(int64_t lo, int64_t hi, const auto& ok) {
  if (lo > hi || !ok(lo)) return lo - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ok(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

void add_int4_suggestion(const ModelConfig& cfg, const PlanInputs& in, PlanResult& out) {
  if (in.int4_weights || cfg.quant) return;  // an AWQ/GPTQ config is int4 already
  PlanInputs q = in;
  q.int4_weights = true;
  const auto layouts = evaluate_all(cfg, q);
  const int best = pick_best(layouts);
  const std::string size = format_gb(model_weight_bytes(cfg, q));
  if (best < 0) {
    out.suggestions.push_back({"An int4 AWQ/GPTQ checkpoint (about " + size +
                                   ", int4-g128 estimate) would not fit on " +
                                   gpus_words(in, in.gpus, in.nodes) + " either.",
                               ""});
    return;
  }
  const LayoutVerdict& v = layouts[size_t(best)];
  out.suggestions.push_back(
      {"An int4 AWQ/GPTQ checkpoint (about " + size + ", int4-g128 estimate) would fit as " +
           layout_flags(v.layout) + ": biggest rank " + format_gib(v.biggest_rank().total()) +
           " of " + format_gib(v.budget) + " GiB (" + memory_breakdown(v.biggest_rank()) +
           "); qmpi loads such checkpoints as they are (docs/choosing-layouts.md).",
       launch_command(v.layout, q)});
}

void add_less_kv_suggestion(const ModelConfig& cfg, const PlanInputs& in, PlanResult& out) {
  const int64_t bs = std::max(in.block_size, 1);
  const int64_t len = resolved_max_model_len(cfg, in);
  PlanInputs probe = in;
  probe.kv_blocks = 0;
  probe.max_model_len = len;
  auto suggest = [&](const std::string& what) {
    const auto layouts = evaluate_all(cfg, probe);
    const LayoutVerdict& v = layouts[size_t(pick_best(layouts))];
    out.suggestions.push_back({what + " as " + layout_flags(v.layout) + ", biggest rank " +
                                   format_gib(v.biggest_rank().total()) + " of " +
                                   format_gib(v.budget) + " GiB.",
                               launch_command(v.layout, probe)});
  };
  if (in.max_num_seqs > 1) {
    const int64_t seqs = largest_ok(1, in.max_num_seqs - 1, [&](int64_t s) {
      probe.max_num_seqs = s;
      return fits_somewhere(cfg, probe);
    });
    if (seqs >= 1) {
      probe.max_num_seqs = seqs;
      suggest("Fewer sequences would fit: --max-num-seqs " + std::to_string(seqs) +
              " at --max-model-len " + std::to_string(len));
      return;
    }
  }
  probe.max_num_seqs = 1;
  const int64_t blocks = largest_ok(1, (len - 1) / bs, [&](int64_t b) {
    probe.max_model_len = b * bs;
    return fits_somewhere(cfg, probe);
  });
  if (blocks < 1) return;
  probe.max_model_len = blocks * bs;
  suggest("A shorter context would fit: --max-model-len " + std::to_string(probe.max_model_len) +
          " with --max-num-seqs 1");
}

void add_more_gpus_suggestion(const ModelConfig& cfg, const PlanInputs& in, PlanResult& out) {
  const int per_host = gpus_per_host(in);
  const int nodes = std::max(in.nodes, 1);
  // Bigger single hosts (up to the common 8 GPUs) and up to 8 times the hosts, fewest GPUs
  // first; beyond that the answer is a smaller model or a quantized one, not a bigger cluster.
  std::vector<std::pair<int, int>> candidates;        // (gpus per host, nodes)
  if (nodes == 1 && in.backend == BackendKind::Cuda)  // more CPU ranks share the same memory
    for (int g = per_host + 1; g <= 8; ++g) candidates.push_back({g, 1});
  for (int n = nodes + 1; n <= nodes * 8; ++n) candidates.push_back({per_host, n});
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](auto a, auto b) { return a.first * a.second < b.first * b.second; });
  for (const auto& [g, n] : candidates) {
    PlanInputs more = in;
    more.gpus = g * n;
    more.nodes = n;
    const auto layouts = evaluate_all(cfg, more);
    const int best = pick_best(layouts);
    if (best < 0) continue;
    const LayoutVerdict& v = layouts[size_t(best)];
    const char* what = in.backend == BackendKind::Cuda ? "More GPUs of this size would fit: "
                                                       : "More hosts like this one would fit: ";
    out.suggestions.push_back({what + gpus_words(in, g * n, n) + " as " + layout_flags(v.layout) +
                                   ", biggest rank " + format_gib(v.biggest_rank().total()) +
                                   " of " + format_gib(v.budget) + " GiB.",
                               launch_command(v.layout, more)});
    return;
  }
}

}  // namespace

uint64_t tp_bytes_per_token(const ModelConfig& cfg, const Layout& layout, int64_t stage_layers,
                            bool first_stage) {
  const uint64_t tp = uint64_t(layout.tp);
  const uint64_t reduces = 2 * uint64_t(stage_layers) + (first_stage ? 1 : 0);
  return reduces * 2 * (tp - 1) * uint64_t(cfg.hidden_size) * sizeof(float) / tp;
}

LayoutVerdict evaluate_layout(const ModelConfig& cfg, const Layout& layout, const PlanInputs& in) {
  return evaluate(cfg, layout, in, expected_tensors(cfg));
}

std::string launch_command(const Layout& layout, const PlanInputs& in) {
  const int ranks = layout.world_ranks();
  std::string cmd = "mpirun -np " + std::to_string(ranks);
  const int per_host = gpus_per_host(in);
  if (ranks > per_host)
    cmd += " --hostfile HOSTFILE --map-by ppr:" + std::to_string(per_host) + ":node";
  cmd += " qmpi " + in.command + " " + in.model_arg + " " + layout_flags(layout);
  if (in.backend == BackendKind::Cuda) cmd += " --backend cuda";
  if (in.max_model_len > 0) cmd += " --max-model-len " + std::to_string(in.max_model_len);
  if (in.max_num_seqs != 1) cmd += " --max-num-seqs " + std::to_string(in.max_num_seqs);
  if (in.kv_blocks > 0) cmd += " --kv-blocks " + std::to_string(in.kv_blocks);
  if (in.backend == BackendKind::Cpu && in.kv_cache_memory > 0)
    cmd += " --kv-cache-memory " + std::to_string(in.kv_cache_memory);
  return cmd;
}

std::string memory_sentence(const LayoutVerdict& v, const PlanInputs& in) {
  const RankMemory& m = v.biggest_rank();
  return "with " + layout_flags(v.layout) + ", rank " + std::to_string(m.rank) + " (stage " +
         std::to_string(m.stage) + ", TP rank " + std::to_string(m.tp_rank) + ", layers " +
         std::to_string(m.layers.begin) + "-" + std::to_string(m.layers.end - 1) + ") needs " +
         format_gib(m.total()) + " GiB (" + memory_breakdown(m) + ") but has " +
         format_gib(v.budget) + " GiB (" + budget_words(in, v.gpus()) + ")";
}

PlanResult plan_layouts(const ModelConfig& cfg, const PlanInputs& in) {
  PlanResult out;
  out.inputs = in;
  out.layouts = evaluate_all(cfg, in);
  out.best = pick_best(out.layouts);
  if (out.best >= 0) {
    const LayoutVerdict& v = out.layouts[size_t(out.best)];
    const RankMemory& m = v.biggest_rank();
    out.recommendation = "Use " + layout_flags(v.layout) + " on " +
                         gpus_words(in, v.gpus(), v.hosts) + ": its biggest rank (rank " +
                         std::to_string(m.rank) + ") needs " + format_gib(m.total()) + " of " +
                         format_gib(v.budget) + " GiB (" + memory_breakdown(m) + "), with " +
                         kv_room_words(cfg, v, in) + ".";
    out.command = launch_command(v.layout, in);
    // The alternatives a user weighs: the other layouts of all the GPUs and of as many as the
    // recommendation uses.
    for (size_t i = out.layouts.size(); i-- > 0;) {
      const LayoutVerdict& o = out.layouts[i];
      if (int(i) != out.best && o.valid && (o.gpus() == in.gpus || o.gpus() == v.gpus()))
        out.why.push_back(why_not(cfg, v, o));
    }
    return out;
  }
  // Nothing fits: say why for the layout that comes closest, then what would fit.
  const LayoutVerdict* closest = nullptr;
  for (const auto& v : out.layouts)
    if (v.valid && (!closest || v.biggest_rank().total() < closest->biggest_rank().total()))
      closest = &v;
  if (!closest) {
    out.failure = out.layouts.empty() ? Err::Usage : out.layouts.front().code;
    out.recommendation =
        "No layout of " + gpus_words(in, in.gpus, in.nodes) +
        " can run this model: " + (out.layouts.empty() ? "no GPUs" : out.layouts.front().reason) +
        ".";
  } else {
    out.failure = closest->memory_code;
    out.recommendation = "Nothing fits on " + gpus_words(in, in.gpus, in.nodes) + ": at best, " +
                         memory_sentence(*closest, in) + ".";
    if (out.failure == Err::KvCacheDoesNotFit) add_less_kv_suggestion(cfg, in, out);
    add_int4_suggestion(cfg, in, out);
    if (out.failure == Err::WeightsDoNotFit) add_less_kv_suggestion(cfg, in, out);
  }
  add_more_gpus_suggestion(cfg, in, out);
  return out;
}

void preflight(const ModelConfig& cfg, const Layout& layout, const PlanInputs& in) {
  const LayoutVerdict v = evaluate_layout(cfg, layout, in);
  // An unknown budget (no GPU memory or host memory figure) leaves only the layout rules.
  const bool budget_known = in.backend == BackendKind::Cuda ? in.gpu_mem > 0 : in.host_mem > 0;
  if (v.valid && (v.fits || !budget_known)) return;
  if (!budget_known) raise(v.code, v.reason, v.fix);
  PlanInputs all = in;
  all.gpus = std::max(in.gpus, v.gpus());
  const PlanResult plan = plan_layouts(cfg, all);
  std::string fix;
  if (plan.best >= 0) {
    fix = "Launch `" + plan.command + "` (`qmpi plan` explains every layout).";
  } else {
    for (const auto& s : plan.suggestions)
      fix += (fix.empty() ? "" : " Or: ") + s.sentence +
             (s.command.empty() ? "" : " `" + s.command + "`");
    if (fix.empty()) fix = v.valid ? std::string(error_entry(v.memory_code).fix) : v.fix;
  }
  if (!v.valid) raise(v.code, v.reason, fix);
  raise(v.memory_code, "The model does not fit: " + memory_sentence(v, in), fix);
}

}  // namespace qmpi
