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
#include "parallel/mesh.h"
#include "plan/checkpoint_dtypes.h"
#include "plan/memory_report.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

// What the planner is told about this launch: the same for the check and for the report.
PlanInputs launch_plan_inputs(const Mesh& mesh, const EngineOptions& o) {
  PlanInputs in;
  in.gpus = mesh.size();
  std::set<std::string> hosts;
  for (const auto& p : mesh.placements()) hosts.insert(p.host);
  in.nodes = int(hosts.size());
  in.backend = o.cuda ? BackendKind::Cuda : BackendKind::Cpu;
  in.gpu_util = o.gpu_memory_utilization;
  in.max_model_len = o.max_model_len;
  in.max_num_seqs = o.max_num_seqs;
  in.max_step_tokens = o.max_step_tokens;
  in.block_size = o.block_size;
  in.kv_blocks = o.kv_blocks;
  in.kv_dtype = o.kv_dtype;
  if (!o.synthetic_weights && std::filesystem::is_directory(o.model_path))
    in.tensor_dtypes = read_checkpoint_dtypes(o.model_path);
  in.command = o.command;
  in.model_arg = o.synthetic_weights ? "--synthetic-weights --model-config " + o.model_config
                                     : "--model " + o.model_path;
  return in;
}

}  // namespace

void launch_preflight(const ModelConfig& cfg, const Mesh& mesh, const EngineOptions& o) {
  PlanInputs in = launch_plan_inputs(mesh, o);
  if (!o.cuda) {
    in.host_mem = host_available_memory();  // the host's free memory now
  } else {
#ifdef QMPI_WITH_CUDA
    // The backend has selected this rank's device: its size, shared with the other ranks
    // placed on it (--comm mpi), is the budget the planner checks before any weight is read.
    in.gpu_mem = cuda::query_device_memory().total_bytes /
                 uint64_t(ranks_sharing_device(mesh.placements(), mesh.rank()));
#endif
  }
  Layout layout{mesh.tp(), mesh.pp(), o.layout.pp_layers};
  layout.dp = mesh.dp();  // the planner costs the replicas' ranks together on a shared host
  preflight(cfg, layout, in);
}

std::string launch_memory_report(const ModelConfig& cfg, const Mesh& mesh, const EngineOptions& o,
                                 const MeasuredMemory& measured) {
  PlanInputs in = launch_plan_inputs(mesh, o);
  if (measured.device) in.gpu_mem = measured.total_bytes;
  const PredictedMemory p =
      predict_rank_memory(cfg, make_shard_plan(cfg, mesh.layout(), mesh.replica_rank()), in,
                          ranks_sharing_device(mesh.placements(), mesh.rank()));
  return memory_report_line(p, measured);
}

}  // namespace qmpi
