// The launch-time pre-flight: the planner's checks with what this job actually has (its ranks
// and hosts, the host's free memory on CPU, the device's memory on CUDA), before a weight is
// read; and, once the KV cache is allocated, the planner's prediction for the rank next to what
// it measured.
#include <filesystem>
#include <set>

#include "app/commands/options.h"
#ifdef QMPI_WITH_CUDA
#include "backend/cuda/cuda_device.h"
#endif
#include "engine/kv_sizing.h"
#include "io/gguf_file.h"
#include "parallel/mesh.h"
#include "plan/checkpoint_dtypes.h"
#include "plan/draft_memory.h"
#include "plan/memory_report.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

// What the planner is told about this launch: the same for the check and for the report.
PlanInputs launch_plan_inputs(const Mesh& mesh, const EngineConfig& c) {
  PlanInputs in;
  in.gpus = mesh.size();
  std::set<std::string> hosts;
  for (const auto& p : mesh.placements()) hosts.insert(p.host);
  in.nodes = int(hosts.size());
  in.backend = c.parallel.cuda ? BackendKind::Cuda : BackendKind::Cpu;
  in.gpu_util = c.cache.gpu_memory_utilization;
  in.max_model_len = c.cache.max_model_len;
  in.max_num_seqs = c.scheduler.max_num_seqs;
  in.max_step_tokens = c.scheduler.max_batched_tokens;
  in.block_size = c.cache.block_size;
  in.kv_blocks = c.cache.kv_blocks;
  in.kv_cache_memory = c.cache.kv_cache_memory;
  in.speculative_tokens = c.scheduler.speculative.num_tokens;
  in.kv_dtype = c.cache.kv_dtype;
  if (!c.lora.modules.empty()) {
    in.max_loras = c.lora.max_loras;
    in.max_lora_rank = c.lora.max_lora_rank;
  }
  in.bf16_activations = c.backend.bf16_activations();
  add_draft_model(in, c.scheduler.speculative.model);
  if (!c.model.synthetic_weights &&
      (std::filesystem::is_directory(c.model.path) || is_gguf_path(c.model.path))) {
    in.tensor_dtypes = read_checkpoint_dtypes(c.model.path);
    in.tensor_blocks = read_checkpoint_blocks(c.model.path);
  }
  in.command = c.launch_command();
  in.model_arg = c.model.launch_arg();
  return in;
}

}  // namespace

void launch_preflight(const ModelConfig& cfg, const Mesh& mesh, const EngineConfig& c) {
  PlanInputs in = launch_plan_inputs(mesh, c);
  if (!c.parallel.cuda) {
    in.host_mem = host_available_memory();  // the host's free memory now
  } else {
#ifdef QMPI_WITH_CUDA
    // The backend has selected this rank's device: its size, shared with the other ranks
    // placed on it (--comm mpi), is the budget the planner checks before any weight is read.
    in.gpu_mem = cuda::query_device_memory().total_bytes /
                 uint64_t(ranks_sharing_device(mesh.placements(), mesh.rank()));
#endif
  }
  Layout layout{mesh.tp(), mesh.pp(), c.parallel.layout.pp_layers};
  layout.dp = mesh.dp();  // the planner costs the replicas' ranks together on a shared host
  preflight(cfg, layout, in);
}

std::string launch_memory_report(const ModelConfig& cfg, const Mesh& mesh, const EngineConfig& c,
                                 const MeasuredMemory& measured) {
  PlanInputs in = launch_plan_inputs(mesh, c);
  // The planner costs a draft model on every replica's first rank; it is on world rank 0 only.
  if (mesh.rank() != 0) in.draft_weights = in.draft_kv_per_token = 0;
  if (measured.device) in.gpu_mem = measured.total_bytes;
  const PredictedMemory p =
      predict_rank_memory(cfg, make_shard_plan(cfg, mesh.layout(), mesh.replica_rank()), in,
                          ranks_sharing_device(mesh.placements(), mesh.rank()));
  return memory_report_line(p, measured);
}

}  // namespace qmpi
