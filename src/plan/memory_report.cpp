#include "plan/memory_report.h"

#include <algorithm>
#include <cstdio>

#include "core/byte_size.h"

namespace qmpi {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Both sizes in the unit of the larger, so that they compare at a glance: "942.3 / 950.1 MiB".
std::string pair_text(uint64_t predicted, uint64_t actual) {
  char buf[96];
  if (std::max(predicted, actual) >= kGiB)
    std::snprintf(buf, sizeof buf, "%.2f / %.2f GiB", double(predicted) / double(kGiB),
                  double(actual) / double(kGiB));
  else
    std::snprintf(buf, sizeof buf, "%.1f / %.1f MiB", double(predicted) / double(1 << 20),
                  double(actual) / double(1 << 20));
  return buf;
}

}  // namespace

PredictedMemory predict_rank_memory(const ModelConfig& cfg, const ShardPlan& plan,
                                    const PlanInputs& in, int ranks_per_device) {
  PredictedMemory p;
  p.rank = rank_memory(cfg, plan, in, expected_tensors(cfg));
  const uint64_t per_block = p.rank.kv_per_token * uint64_t(std::max(in.block_size, 1));
  p.kv_from_budget = !kv_cache_fixed(in) && in.gpu_mem > 0;
  if (!p.kv_from_budget) {
    p.kv_blocks = kv_cache_tokens(cfg, in) / std::max(in.block_size, 1);
    return p;
  }
  p.gpu_util = in.gpu_util;
  p.ranks_per_device = std::max(ranks_per_device, 1);
  p.budget = uint64_t(double(in.gpu_mem) * in.gpu_util) / uint64_t(p.ranks_per_device);
  const uint64_t room = p.budget > p.rank.fixed() ? p.budget - p.rank.fixed() : 0;
  p.kv_blocks = per_block > 0 ? int64_t(room / per_block) : 0;
  p.rank.kv_cache = uint64_t(p.kv_blocks) * per_block;
  return p;
}

std::string memory_report_line(const PredictedMemory& p, const MeasuredMemory& m) {
  const RankMemory& r = p.rank;
  std::string s = "memory predicted / actual: weights " + pair_text(r.weights, m.weight_bytes);
  if (m.device)
    s += ", workspace " + pair_text(r.activations, m.workspace_bytes) + " (" +
         std::to_string(m.profile_tokens) + "-token step)";
  else
    s += ", activations " + format_bytes(r.activations) + " / not measured";
  s += ", overhead " + format_bytes(r.overhead) + " reserved";
  s += ", KV cache " + pair_text(r.kv_cache, uint64_t(m.kv_blocks) * m.bytes_per_block) + " = " +
       std::to_string(p.kv_blocks) + " / " + std::to_string(m.kv_blocks) + " blocks";
  // The CPU's prediction is the one sequence that must fit; its pools are mapped, not touched.
  if (!m.device) return s + " (at least one max-model-len sequence; mapped, held as written)";

  char share[64] = "";
  if (p.ranks_per_device > 1) std::snprintf(share, sizeof share, " / %d ranks", p.ranks_per_device);
  char util[32];
  std::snprintf(util, sizeof util, "%.2f", p.gpu_util);
  s += "; budget " + format_bytes(m.rank_budget_bytes) + " (" + util + " x " +
       format_bytes(m.total_bytes) + share + "), " + format_bytes(m.free_bytes) +
       " free before the KV cache";
  if (m.limited_by_free) s += "; free memory set the limit (another process holds memory here)";
  if (m.rank_kv_blocks > m.kv_blocks)
    s += "; room for " + std::to_string(m.rank_kv_blocks) +
         " blocks here, the job uses the smallest of any rank";
  return s;
}

}  // namespace qmpi
