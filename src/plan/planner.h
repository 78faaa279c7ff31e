// The pre-flight planner: every (TP, PP) layout of up to N GPUs and every (DP, TP, PP) that
// multiplies to N (DP: replicas, each holding the whole model over TP x PP), whether it can run the
// model (TP up to the head count, stages vs layers, TP inside a host), whether its most loaded rank
// fits the budget, and the layout to use — or, when none fits, what would.
//
// Paged semantics: a layout fits when its ranks hold their weights, a step's activations and
// the KV cache of one --max-model-len sequence (on CPU, where the cache is allocated for
// --max-num-seqs sequences, of that many); the plan then reports how many full-length
// sequences the KV cache holds at once. --max-num-seqs is a scheduling limit, not a
// reservation (memory_model.h, KV cache).
//
// Per-rank bytes come from the shard plan the engine loads with, so an uneven TP split is
// costed as it runs: a KV head shared by two TP ranks is counted, with its k/v projection rows
// and its KV cache, on both. Each layout also reports the KV-head copies of a stage and the
// all-reduce bytes a TP rank sends per token.
//
// Recommendation, among the layouts that fit:
//   1. fewest pipeline hops that cross hosts (stage-to-stage traffic over the network);
//   2. most KV room: the tokens of KV cache the tightest rank has room for once its weights,
//      activations and overhead are in, i.e. how many sequences the layout can hold at once.
//      Layouts within kKvRoomTolerance of the most room count as equal, since that little
//      extra room is not worth the latency of
//   3. more pipeline stages (each adds a sequential hop and a bubble to every step);
//   4. then fewer GPUs, then a smaller TP (fewer all-reduces per layer; so, among equals, more
//      data-parallel replicas).
// The KV room of a DP layout is its replicas' together: each replica holds a whole copy of the
// weights, which costs room, but shares no all-reduce and no pipeline bubble with the others.
// So Qwen2.5-72B on 6 x 80 GB gets --tp 2 --pp 3: its ranks have about twice the KV room of
// --tp 6, whose rank 2 holds 3 of the 8 KV heads for all 80 layers (13 KV-head copies in all),
// and a quarter more than --tp 1 --pp 6, whose rank 0 also holds the whole embedding. A small
// model whose layouts all have about the same room gets the fewest stages.
#pragma once
#include <string>
#include <vector>

#include "core/errors.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "plan/memory_model.h"

namespace qmpi {

inline constexpr double kKvRoomTolerance = 0.10;

struct LayoutVerdict {
  Layout layout;
  bool valid = false;
  Err code = Err::Internal;       // the layout rule it breaks, when !valid
  std::string reason;             // that rule's sentence, when !valid
  std::string fix;                // and what to do instead
  std::vector<RankMemory> ranks;  // every rank, when valid
  int biggest = 0;                // index in `ranks` of the rank with the largest total
  uint64_t budget = 0;            // per rank
  bool fits = false;
  Err memory_code = Err::Internal;  // WeightsDoNotFit or KvCacheDoesNotFit when valid && !fits
  // KV tokens the tightest rank has room for (0: none), times dp: what the job holds at once.
  int64_t kv_room_tokens = 0;
  // KV tokens every rank's cache holds: the tightest rank's room on CUDA (the ranks agree on
  // the smallest), the fixed count on CPU or with --kv-blocks; and how many max-model-len
  // sequences that holds at once, over all replicas. --max-num-seqs only caps the latter.
  int64_t rank_kv_tokens = 0;
  int64_t full_length_seqs = 0;
  int tightest = 0;                 // index in `ranks` of the rank with the least KV room
  int64_t kv_head_copies = 0;       // KV heads the TP ranks of one stage hold together
  uint64_t tp_bytes_per_token = 0;  // ring all-reduce bytes a rank of stage 0 sends per token
  int hosts = 1;
  int cross_host_hops = 0;

  int gpus() const { return layout.world_ranks(); }
  const RankMemory& biggest_rank() const { return ranks.at(size_t(biggest)); }
};

// A way out when nothing fits: one sentence and the command that goes with it.
struct Suggestion {
  std::string sentence;
  std::string command;  // empty when the suggestion is not a launch (e.g. get a checkpoint)
};

struct PlanResult {
  PlanInputs inputs;
  std::vector<LayoutVerdict> layouts;   // TP ascending, then PP; then DP > 1 layouts
  int best = -1;                        // index in `layouts`, -1 when nothing fits
  std::string recommendation;           // one sentence (or why nothing fits)
  std::string command;                  // launch line for `best`
  std::vector<std::string> why;         // when best >= 0: why it beat each other layout
  Err failure = Err::Internal;          // when best == -1: WeightsDoNotFit or KvCacheDoesNotFit
  std::vector<Suggestion> suggestions;  // when best == -1: int4, less KV, more GPUs
};

// One layout, every rank. Never throws for a layout the model cannot run: that is the verdict.
LayoutVerdict evaluate_layout(const ModelConfig& cfg, const Layout& layout, const PlanInputs& in);
// Every layout of tp x pp <= in.gpus and of dp x tp x pp == in.gpus (dp > 1), the
// recommendation, and suggestions when nothing fits.
PlanResult plan_layouts(const ModelConfig& cfg, const PlanInputs& in);
// `mpirun -np 6 qmpi serve --model DIR --tp 2 --pp 3 ...` reproducing the inputs' assumptions.
std::string launch_command(const Layout& layout, const PlanInputs& in);
// Bytes one TP rank sends per token in its stage's ring all-reduces: two per layer (attention
// and MLP outputs) plus the embedding's on the first stage, of hidden_size float32 each, of
// which a ring sends 2 (tp - 1) / tp.
uint64_t tp_bytes_per_token(const ModelConfig& cfg, const Layout& layout, int64_t stage_layers,
                            bool first_stage);
// "rank 0 (stage 0, TP rank 0) needs 31.52 GiB (...) but has 21.60 GiB (...)"
std::string memory_sentence(const LayoutVerdict& v, const PlanInputs& in);

// Run by the launch path before anything is loaded, with in.gpus = the job's ranks: raises the
// catalogue error (a layout error, WeightsDoNotFit or KvCacheDoesNotFit) with the planner's
// sentence and, as the fix, the layout or change it recommends. With no budget figure
// (gpu_mem or host_mem of 0) only the layout rules are checked.
void preflight(const ModelConfig& cfg, const Layout& layout, const PlanInputs& in);

}  // namespace qmpi
