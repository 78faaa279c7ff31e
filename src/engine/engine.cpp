#include "engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/host_memory.h"
#include "engine/kv_sizing.h"
#include "engine/profile_step.h"
#include "model/config_bounds.h"
#include "model/gguf_names.h"
#include "model/lora_loader.h"
#include "model/synthetic.h"
#include "parallel/gather_strings.h"
#include "parallel/mesh.h"
#include "parallel/mpi_runtime.h"

namespace qmpi {
namespace {

// QMPI_DUMP / QMPI_DUMP_DIR: the debug hook of model/tensor_dump.h (nothing when unset).
TensorDump tensor_dump_from_env(int rank) {
  const char* spec = std::getenv("QMPI_DUMP");
  if (!spec || !*spec) return {};
  const char* dir = std::getenv("QMPI_DUMP_DIR");
  return TensorDump(spec, dir && *dir ? dir : ".", rank);
}

ModelConfig load_config(const ModelSource& m) {
  if (m.synthetic_weights) {
    if (!m.config_path.empty())
      return ModelConfig::load(m.config_path, m.overrides);  // file or folder
    if (m.path.empty())
      raise(Err::Usage, "--synthetic-weights needs --model-config FILE or --model DIR");
    return ModelConfig::load(m.path, m.overrides);
  }
  if (m.path.empty()) raise(Err::Usage, "--model is required");
  return ModelConfig::load(m.path, m.overrides);
}

// Rank 0 logs one start-up summary: the layout, the model and the KV cache, then every rank's
// line in rank order (gathered: a rank's own log lines would interleave with the others').
// Each rank's line is also at debug level on that rank, for when a rank never gets here.
void log_startup(const Mesh& mesh, const ModelConfig& cfg, const KvCacheShape& kv,
                 const std::string& rank_line) {
  spdlog::debug("{}", rank_line);
  const std::vector<std::string> lines = all_gather_strings(MPI_COMM_WORLD, rank_line);
  if (mesh.rank() != 0) return;
  std::string s = fmt::format(
      "start-up: {}, {} layers, as {} on {} rank{}; KV cache {} blocks of {} tokens per rank",
      cfg.architecture, cfg.num_layers, layout_flags(mesh.layout()), mesh.size(),
      mesh.size() == 1 ? "" : "s", kv.num_blocks, kv.block_size);
  for (const std::string& line : lines) s += "\n" + line;
  spdlog::info("{}", s);
}

}  // namespace

Engine::Engine(MpiRuntime& mpi, const EngineConfig& config) : opts_(config) {
  const ModelSource& m = opts_.model;
  cfg_ = load_config(m);
  max_model_len_ =
      opts_.cache.max_model_len > 0 ? opts_.cache.max_model_len : cfg_.derived_max_model_len();

  // Rank 0 logs the mapping table.
  mesh_ = std::make_unique<Mesh>(mpi, model_fit(cfg_), opts_.parallel);
  // Every replica the same.
  shard_ = make_shard_plan(cfg_, opts_.parallel.layout, mesh_->replica_rank());
  const ShardPlan& plan = shard_;

  // generation_config.json sits beside config.json (synthetic runs) or in the model folder.
  std::filesystem::path gen_dir = m.path;
  if (m.synthetic_weights && !m.config_path.empty()) {
    gen_dir = m.config_path;
    if (!std::filesystem::is_directory(gen_dir)) gen_dir = gen_dir.parent_path();
  }
  gen_ = GenerationConfig::load(gen_dir.string(), cfg_);

  backend_ = opts_.backend.make_backend(mesh_->device_index());
  if (opts_.preflight) opts_.preflight(cfg_, *mesh_, opts_);
  // NCCL needs the rank's device selected first, so the TP comm is swapped in after.
  if (opts_.backend.make_tp_comm) mesh_->replace_tp_comm(opts_.backend.make_tp_comm);
  world_ = std::make_unique<TimedComm>(mesh_->world());
  tp_ = std::make_unique<TimedComm>(mesh_->tp_group());

  std::unique_ptr<WeightSource> source;
  if (m.synthetic_weights && cfg_.quant)
    raise(Err::Usage,
          "--synthetic-weights generates float weights, but the config is a quantized (" +
              cfg_.quant.method_name() + ") checkpoint's",
          "Write a random quantized model with `qmpi make-model --quant " +
              cfg_.quant.method_name() + " --like CONFIG --out DIR` and run that.");
  if (m.synthetic_weights)
    source = std::make_unique<SyntheticWeights>(cfg_, m.synthetic_seed, cfg_.torch_dtype);
  else
    source = open_model_weights(m.path, m.verify_checksums);
  if (!m.synthetic_weights) confirm_config_with_weights(cfg_, *source);
  DecoderWeights weights = load_decoder_weights(cfg_, plan, *source, *backend_);
  weights.bytes += load_lora_adapters(cfg_, plan, opts_.lora, *backend_, weights,
                                      opts_.backend.bf16_activations());
  weight_bytes_ = weights.bytes;
  bytes_read_ = source->bytes_read();
  const std::string origin = m.synthetic_weights
                                 ? fmt::format("generated from seed {}", m.synthetic_seed)
                                 : fmt::format("{} bytes read", bytes_read_);
  std::string rank_line =
      fmt::format("[{}] stage {} tp {}: layers {}-{}, {:.1f} MiB of weights ({})", mesh_->log_tag(),
                  plan.stage, plan.tp_rank, plan.layers.begin, plan.layers.end - 1,
                  double(weight_bytes_) / (1 << 20), origin);
  model_ = std::make_unique<DecoderModel>(cfg_, plan, *backend_, *tp_, std::move(weights),
                                          tensor_dump_from_env(mesh_->rank()));
  if (opts_.backend.graphs() && !model_->recordable() && mesh_->rank() == 0)
    spdlog::warn(
        "--cuda-graphs: every step runs eagerly here: graphs need --tp 1, a model without MoE "
        "layers or dynamic rope_scaling, and no QMPI_DUMP");

  KvCacheShape kv;
  kv.num_layers = int(plan.layers.size());
  kv.block_size = opts_.cache.block_size;
  kv.kv_heads = int(plan.kv_heads.size());
  kv.head_dim = int(cfg_.head_dim);
  kv.dtype = opts_.cache.kv_dtype;
  // A draft model lives on rank 0 beside its share of the target (draft_model_proposer.h says
  // why): its weights load before the cache is sized, and its cache, one block per target
  // block, counts in rank 0's bytes per block.
  const SpeculativeConfig& spec = opts_.scheduler.speculative;
  if (is_driver() && !spec.model.empty()) {
    draft_ = std::make_shared<DraftModelProposer>(spec.model, cfg_, *backend_, spec.num_tokens);
    weight_bytes_ += draft_->weight_bytes();
    rank_line += fmt::format("; draft model {}: {:.1f} MiB of weights", spec.model,
                             double(draft_->weight_bytes()) / (1 << 20));
  }
  size_kv_cache(kv);
  cache_ = std::make_unique<KvCache>(*backend_, kv);
  if (opts_.memory_report) rank_line += "; " + opts_.memory_report(cfg_, *mesh_, opts_, measured_);
  log_startup(*mesh_, cfg_, kv, rank_line);

  MeshPosition pos;
  pos.rank = mesh_->rank();
  pos.tp_rank = mesh_->tp_rank();
  pos.stage = mesh_->stage();
  pos.pp = mesh_->pp();
  pos.tp = mesh_->tp();
  pos.prev_stage_rank = mesh_->prev_stage_rank();
  pos.next_stage_rank = mesh_->next_stage_rank();
  pos.dp = mesh_->dp();
  pos.result_rank = pos.replica_result_rank(mesh_->replica());
  executor_ = std::make_unique<Executor>(pos, *world_, *tp_, mesh_->replica_group(), *backend_,
                                         *model_, *cache_);
  if (draft_) draft_->allocate_cache(kv, executor_.get());
  if (is_driver()) {
    // Every rank of every replica has the same number of blocks (agreed over the world), so each
    // replica's block table on rank 0 has that many.
    for (int r = 0; r < mesh_->dp(); ++r)
      blocks_.push_back(std::make_unique<BlockManager>(kv.num_blocks, kv.block_size));
    own_runner_ = std::make_unique<ExecutorRunner>(*executor_);
    for (int r = 1; r < mesh_->dp(); ++r)
      other_runners_.push_back(std::make_unique<ReplicaRunner>(*executor_, *world_, *backend_, r));
  }
}

std::vector<StepRunner*> Engine::replica_runners() {
  std::vector<StepRunner*> out{own_runner_.get()};
  for (auto& r : other_runners_) out.push_back(r.get());
  return out;
}

std::vector<BlockManager*> Engine::replica_blocks() {
  std::vector<BlockManager*> out;
  for (auto& b : blocks_) out.push_back(b.get());
  return out;
}

void Engine::size_kv_cache(KvCacheShape& kv) {
  measured_.weight_bytes = weight_bytes_;
  measured_.bytes_per_block = kv.bytes_per_block() + (draft_ ? draft_->kv_bytes_per_block(kv) : 0);
  const CacheConfig& c = opts_.cache;
  const int64_t max_num_seqs = opts_.scheduler.max_num_seqs;
  if (c.kv_blocks > 0) {
    kv.num_blocks = c.kv_blocks;
  } else if (opts_.backend.size_kv_on_device) {
    // Every rank measures its own device, then all take the smallest room (one block table).
    const ProfileShape shape = profile_shape(opts_.scheduler.max_batched_tokens, max_model_len_,
                                             max_num_seqs, opts_.scheduler.speculative.num_tokens);
    DeviceKvRequest req;
    req.utilization = c.gpu_memory_utilization;
    req.ranks_per_device = ranks_sharing_device(mesh_->placements(), mesh_->rank());
    req.bytes_per_block = measured_.bytes_per_block;
    KvCacheShape one_block = kv;
    one_block.num_blocks = 1;
    req.profile_kv_bytes = one_block.bytes();
    kv.num_blocks = agree_on_kv_blocks(mesh_->world(), mesh_->log_tag(), [&] {
      measured_ = opts_.backend.size_kv_on_device(
          *backend_, req, [&] { run_profile_step(*model_, *backend_, kv, shape); });
      measured_.profile_tokens = shape.tokens;
      return measured_.rank_kv_blocks;
    });
  } else {
    // CPU: blocks from a memory budget, every rank agreeing on the smallest count.
    kv.num_blocks = agree_on_kv_blocks(mesh_->world(), mesh_->log_tag(), [&] {
      const uint64_t budget = c.kv_cache_memory > 0
                                  ? c.kv_cache_memory
                                  : uint64_t(kCpuKvMemoryShare * double(host_available_memory())) /
                                        uint64_t(ranks_on_host(mesh_->placements(), mesh_->rank()));
      return cpu_kv_blocks(budget, measured_.bytes_per_block, max_num_seqs, max_model_len_,
                           c.block_size);
    });
  }
  if (measured_.rank_kv_blocks == 0) measured_.rank_kv_blocks = kv.num_blocks;
  measured_.kv_blocks = kv.num_blocks;
}

SchedulerConfig Engine::scheduler_config() const {
  SchedulerConfig s = opts_.scheduler;
  s.max_model_len = max_model_len_;
  if (s.max_batched_tokens == 0) s.max_batched_tokens = max_model_len_;
  s.draft_model = draft_;
  return s;
}

Engine::~Engine() = default;

bool Engine::is_driver() const {
  return mesh_->rank() == 0;
}

void Engine::serve() {
  executor_->serve();
}

void Engine::shutdown() {
  if (is_driver() && !shut_down_) {
    for (auto& r : other_runners_) r->shutdown();
    executor_->shutdown();
  }
  shut_down_ = true;
}

}  // namespace qmpi
