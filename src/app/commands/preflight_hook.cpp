// The launch-time pre-flight: the planner's checks with what this job actually has (its ranks
// and hosts, the host's free memory on CPU), before a weight is read.
#include <filesystem>
#include <set>

#include "app/commands/options.h"
#include "dist/mesh.h"
#include "plan/checkpoint_dtypes.h"
#include "plan/planner.h"

namespace qmpi {

void launch_preflight(const ModelConfig& cfg, const Mesh& mesh, const EngineOptions& o) {
  PlanInputs in;
  in.gpus = mesh.size();
  std::set<std::string> hosts;
  for (const auto& p : mesh.placements()) hosts.insert(p.host);
  in.nodes = int(hosts.size());
  in.backend = o.cuda ? BackendKind::Cuda : BackendKind::Cpu;
  // The CUDA budget needs the device's memory, which the backend reports later (predicted vs
  // actual); on CPU the budget is what the host has free now.
  if (!o.cuda) in.host_mem = host_available_memory();
  in.gpu_util = o.gpu_memory_utilization;
  in.max_model_len = o.max_model_len;
  in.max_num_seqs = o.max_num_seqs;
  in.block_size = o.block_size;
  in.kv_blocks = o.kv_blocks;
  if (!o.synthetic_weights && std::filesystem::is_directory(o.model_path))
    in.tensor_dtypes = read_checkpoint_dtypes(o.model_path);
  in.model_arg = o.synthetic_weights ? "--synthetic-weights --model-config " + o.model_config
                                     : "--model " + o.model_path;
  preflight(cfg, Layout{mesh.tp(), mesh.pp(), o.layout.pp_layers}, in);
}

}  // namespace qmpi
