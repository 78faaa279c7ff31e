// Per-rank memory of a layout, before anything is loaded: weights (exact bytes, from the shard
// plan and the checkpoint's dtypes), KV cache, activations/workspace and runtime overhead,
// against the rank's budget. The formulas mirror what the engine allocates.
//
// Weights:     sum over expected_tensors(cfg) of the slice this rank owns (ShardPlan::slice_for)
//              x the tensor's dtype size (safetensors header, else config torch_dtype). Tied
//              models hold the embedding on the first and the last stage.
// Int4 checkpoints (config.json has a quantization_config): decoder linears at what the engine
//              holds, 1/2 + 3/group bytes per weight (packed values, fp16 scale and 1-byte zero
//              per group and output); everything else at its checkpoint dtype.
// Int4 weights (estimate for a bf16 config): the same slices, decoder linears (*_proj.weight) at
// 133/256 bytes per weight
//              (4-bit value + fp16 scale and 4-bit zero per group of 128: facts §7), every other
//              tensor at 2 bytes (fp16).
// LoRA:        adapters are held beside the weights and counted in them: max_loras x
//              max_lora_rank x (in + out) per projection (q/k/v/o/gate/up/down; attention only
//              on MoE layers) per layer of the rank, with in and out as the rank holds them (A
//              whole and B split on column-parallel projections, the reverse on row-parallel
//              ones: model/lora_loader.h), at 2 bytes on BF16 projections with bf16 activations
//              and 4 otherwise (float32, the widest an adapter file has).
// KV cache:    2 (K, V) x layers on the stage x KV heads on the rank x head_dim x KV dtype size
//              (kv_bytes_per_token) x tokens: kv_blocks x block_size when given; else, on CUDA,
//              one sequence of max_model_len in whole blocks, the least the cache must hold (the
//              engine gives the cache the memory left over and --max-num-seqs only limits how
//              many sequences run at once, as in vLLM); on CPU max_num_seqs such sequences,
//              which the CPU cache allocates up front.
// Activations: float32 (the Backend convention), T tokens per step: max_step_tokens
//              (--max-batched-tokens of batch and serve) or else max(max_model_len,
//              max_num_seqs) (a whole prompt prefilled in one step, or one token per sequence),
//              the step the engine profiles on a device (engine/kv_sizing.h profile_shape):
//              T x (3 h + 2 q_local + 2 kv_local + 2 im_local) floats — the step's hidden state,
//              its normed copy, q, k, v, attention output, projection output, gate and up
//              (the decoder's and its blocks' scratch slots). MoE layers add the router logits
//              (T x experts), the gathered rows of one expert and its output (2 T h, when every
//              token picks it), that expert's gate and up (2 T moe_im) and the shared expert's
//              output, gate and up (T h + 2 T shared_local). The last stage adds, per sampled
//              sequence (min(T, max_num_seqs) rows), the logit row's hidden state, its vocab slice
//              and the TP gather of the slices (h + per_rank x (1 + tp) floats) and the host copies
//              (2 x vocab floats). Attention is computed without a T x T score matrix, so it adds
//              nothing here.
// Overhead:    a constant per backend, kRuntimeOverheadCuda / kRuntimeOverheadCpu.
// Draft model: (--speculative-config "model") rank 0 of a replica also holds the draft whole:
//              its weights (counted in `weights`, as draft_weights) and, per token of the
//              target's cache, the draft's own K and V (in kv_per_token): its cache has one
//              block per target block (engine/draft_model_proposer.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "core/host_memory.h"
#include "model/config.h"
#include "model/shard_plan.h"

namespace qmpi {

enum class BackendKind { Cpu, Cuda };

// CUDA context and loaded kernel modules (~0.5 GiB), cuBLAS/cuBLASLt workspaces, the
// flash-decoding partials (kernels/cuda/launch_shapes.h: ~1 MiB on 132 SMs), NCCL
// communicator buffers for the TP group and the pipeline neighbours, and allocator slack.
inline constexpr uint64_t kRuntimeOverheadCuda = 1ull << 30;
// MPI shared-memory segments, OpenMP thread stacks, the tokenizer and request
// state on rank 0, and allocator slack.
inline constexpr uint64_t kRuntimeOverheadCpu = 256ull << 20;
// The fraction of a GPU's memory qmpi plans to use unless told otherwise (as vLLM's
// --gpu-memory-utilization).
inline constexpr double kDefaultGpuUtil = 0.9;
// What model/kv_cache.h stores unless --kv-dtype says otherwise.
inline constexpr DType kEngineKvDType = DType::BF16;
// int4-g128 bytes per quantized weight = (1/2 + 1/64 + 1/256) = 133/256 (facts §7).
inline constexpr uint64_t kInt4BytesNum = 133, kInt4BytesDen = 256;

struct PlanInputs {
  int gpus = 1;   // devices (CUDA) or ranks (CPU) available for the job
  int nodes = 1;  // hosts they are spread over, the same number on each
  BackendKind backend = BackendKind::Cuda;
  uint64_t gpu_mem = 0;  // bytes per GPU (CUDA)
  double gpu_util = kDefaultGpuUtil;
  uint64_t host_mem = 0;      // bytes per host the ranks may share (CPU backend)
  int64_t max_model_len = 0;  // 0: ModelConfig::derived_max_model_len(), as the engine
  int64_t max_num_seqs = 1;
  int64_t max_step_tokens = 0;  // tokens of the largest step; 0: max(max_model_len, max_num_seqs)
  int block_size = 16;          // KV cache block (tokens)
  int64_t kv_blocks = 0;        // 0: max_num_seqs sequences of max_model_len
  // CPU: the KV cache's budget per rank (--kv-cache-memory); 0: the engine's default share of
  // the host's memory (kCpuKvMemoryShare).
  uint64_t kv_cache_memory = 0;
  int32_t speculative_tokens = 0;  // --speculative-config's guesses per step: more logit rows
  // LoRA: --max-loras adapter slots of --max-lora-rank on every projection (0: no adapters),
  // counted in the weights (see LoRA above); bf16_activations: --dtype is not float32.
  int64_t max_loras = 0;
  int64_t max_lora_rank = 0;
  bool bf16_activations = true;
  // A draft model on rank 0 (plan/draft_memory.h): its weights and K/V bytes per token.
  uint64_t draft_weights = 0;
  uint64_t draft_kv_per_token = 0;
  DType kv_dtype = kEngineKvDType;
  bool int4_weights = false;  // size the weights as an int4-g128 AWQ/GPTQ checkpoint would be
  // Tensor dtypes from the checkpoint's safetensors headers; tensors not listed (or all, when
  // empty) take the config's torch_dtype.
  std::map<std::string, DType> tensor_dtypes;
  // GGUF models: the ggml block type of each block-quantized tensor (Hugging Face names).
  std::map<std::string, const GgmlTypeInfo*> tensor_blocks;
  // How suggested commands name the model, e.g. "--model /models/Qwen2.5-72B-Instruct", and
  // where its config came from (for reports).
  std::string model_arg = "--model MODEL_DIR";
  std::string model_source;
  // The qmpi command suggested launches run, with what it needs besides the model and layout
  // (`qmpi plan` suggests a server; a launch's pre-flight repeats the command that was run).
  std::string command = "serve";
};

int64_t resolved_max_model_len(const ModelConfig& cfg, const PlanInputs& in);
// One max_model_len sequence in whole blocks.
int64_t sequence_kv_tokens(const ModelConfig& cfg, const PlanInputs& in);
// Whether the KV cache has a fixed count (--kv-blocks) rather than the memory left (CUDA: what
// --gpu-memory-utilization leaves; CPU: kCpuKvMemoryShare of the rank's host memory at most,
// mapped as blocks are used).
bool kv_cache_fixed(const PlanInputs& in);
// Tokens of KV cache every rank must hold before the first step (see KV cache above).
int64_t kv_cache_tokens(const ModelConfig& cfg, const PlanInputs& in);
// K and V of one token over `layers` layers and `kv_heads` KV heads:
// 2 x layers x kv_heads x head_dim x the KV dtype's size. The one place that size is taken.
uint64_t kv_bytes_per_token(const ModelConfig& cfg, int64_t layers, int64_t kv_heads,
                            DType kv_dtype);
// Whole model: every layer and KV head.
uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType kv_dtype);
uint64_t runtime_overhead(BackendKind backend);
// Ranks of a `ranks`-rank layout on its busiest host (ranks fill hosts in order).
int ranks_per_host(const PlanInputs& in, int ranks);
// What one rank may use: gpu_mem x gpu_util on CUDA, host_mem / ranks on its host on CPU.
uint64_t rank_budget(const PlanInputs& in, int ranks);

struct RankMemory {
  int rank = 0, stage = 0, tp_rank = 0;
  Range layers;
  int64_t kv_heads = 0;         // KV heads held (an uneven TP split gives some ranks one more)
  uint64_t weights = 0;         // as they will be held (int4 estimate when in.int4_weights)
  uint64_t expert_weights = 0;  // the part of `weights` in this rank's routed experts (MoE)
  uint64_t lora_weights = 0;    // the part of `weights` in LoRA adapters
  uint64_t draft_weights = 0;   // the part of `weights` that is the draft model's (rank 0)
  uint64_t kv_cache = 0;
  uint64_t kv_per_token = 0;  // this rank's share of one token's K and V
  uint64_t activations = 0;
  uint64_t overhead = 0;
  uint64_t total() const { return weights + kv_cache + activations + overhead; }
  // Everything but the KV cache: what must fit before the first block is allocated.
  uint64_t fixed() const { return weights + activations + overhead; }
};

// Bytes of `tensor` held in memory for its slice `numel` elements (checkpoint dtype or int4).
// GGUF blocks: `cuts_blocks` when the slice's columns cut a block (the loader decodes such a
// slice, and the embedding, to float32).
uint64_t tensor_bytes(const ModelConfig& cfg, const PlanInputs& in, const std::string& tensor,
                      int64_t numel, bool cuts_blocks = false);
// `tensors` is expected_tensors(cfg), passed in so a layout's ranks share one list.
RankMemory rank_memory(const ModelConfig& cfg, const ShardPlan& plan, const PlanInputs& in,
                       const std::vector<TensorSpec>& tensors);
// The checkpoint as a whole (every tensor once), in its dtypes or as int4.
uint64_t model_weight_bytes(const ModelConfig& cfg, const PlanInputs& in);
// The LoRA adapters' bytes on the rank of `plan` (see LoRA above); 0 when in.max_loras is 0.
uint64_t lora_weight_bytes(const ModelConfig& cfg, const ShardPlan& plan, const PlanInputs& in);
// ... and on the whole model (every layer, unsplit).
uint64_t lora_weight_bytes(const ModelConfig& cfg, const PlanInputs& in);

}  // namespace qmpi
