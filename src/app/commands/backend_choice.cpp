// Turns the command line into EngineOptions, choosing the backend and the TP comm. The only
// place that knows whether the CUDA backend was built.
#include <sstream>

#include "app/commands/kv_dtype_option.h"
#include "app/commands/options.h"
#include "backend/cpu/cpu_backend.h"
#include "core/byte_size.h"
#include "core/errors.h"
#ifdef QMPI_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/memory_budget.h"
#include "parallel/nccl/comm_nccl.h"
#include "parallel/nccl/comm_staged_mpi.h"
#include "plan/memory_model.h"
#endif

namespace qmpi {
namespace {

std::vector<int> parse_layers(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoi(item));
    } catch (const std::exception&) {
      raise(Err::Usage, "--pp-layers: '" + item + "' is not a layer count",
            "Give one count per stage, e.g. --pp-layers 27,27,26");
    }
  }
  return out;
}

#ifdef QMPI_WITH_CUDA
// The KV cache from --gpu-memory-utilization: the workspace is what the profiling step used,
// the overhead the planner's kRuntimeOverheadCuda, so the numbers match `qmpi plan`.
MeasuredMemory size_kv_on_cuda(Backend& backend, const DeviceKvRequest& r,
                               const std::function<void()>& profile_step) {
  auto& cuda = static_cast<CudaBackend&>(backend);  // made by make_cuda_backend below
  cuda.reset_memory_peaks();
  profile_step();
  const cuda::DeviceKvBudget d =
      cuda::plan_kv_blocks_on_device(cuda, r.utilization, r.ranks_per_device, kRuntimeOverheadCuda,
                                     r.bytes_per_block, r.profile_kv_bytes);
  MeasuredMemory m;
  m.device = true;
  m.total_bytes = d.input.total_bytes;
  m.free_bytes = d.input.free_bytes;
  m.weight_bytes = d.input.weight_bytes;
  m.workspace_bytes = d.input.workspace_bytes;
  m.overhead_bytes = d.input.overhead_bytes;
  m.rank_budget_bytes = d.budget.rank_budget_bytes;
  m.limited_by_free = d.budget.limited_by_free;
  m.rank_kv_blocks = d.budget.num_blocks;
  m.bytes_per_block = r.bytes_per_block;
  return m;
}
#endif

// Limits a negative or zero value would turn into nonsense further on (-1 sequences became
// an allocation of 18 EB), refused here with the value as given.
void check_engine_limits(const EngineCli& c) {
  const auto at_least = [](const char* option, int64_t v, int64_t min) {
    if (v < min)
      raise(Err::Usage, std::string("--") + option + " must be at least " + std::to_string(min) +
                            ", got " + std::to_string(v));
  };
  at_least("max-num-seqs", c.max_num_seqs, 1);
  at_least("max-model-len", c.max_model_len, 0);  // 0: from the model
  at_least("kv-blocks", c.kv_blocks, 0);          // 0: sized from memory
  at_least("threads", c.threads, 0);              // 0: the OpenMP default
  if (!(c.comm_timeout >= 0)) raise(Err::Usage, "--comm-timeout must be 0 (none) or more seconds");
  if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1))
    raise(Err::Usage, "--gpu-memory-utilization must be in (0, 1]");
}

}  // namespace

EngineOptions to_engine_options(const EngineCli& c, const SchedulerCli& s) {
  if (s.max_batched_tokens < 1)
    raise(Err::Usage,
          "--max-batched-tokens must be at least 1, got " + std::to_string(s.max_batched_tokens));
  if (s.default_max_tokens < 0)
    raise(Err::Usage, "--default-max-tokens must be 0 (OpenAI's defaults) or more, got " +
                          std::to_string(s.default_max_tokens));
  EngineOptions o = to_engine_options(c);
  o.max_step_tokens = s.max_batched_tokens;
  return o;
}

EngineOptions to_engine_options(const EngineCli& c) {
  EngineOptions o;
  o.model_path = c.model;
  o.verify_checksums = c.verify;
  o.synthetic_weights = c.synthetic;
  o.model_config = c.model_config;
  o.synthetic_seed = c.seed;
  o.layout.tp = c.tp;
  o.layout.pp = c.pp;
  o.layout.dp = c.dp;
  if (!c.pp_layers.empty()) o.layout.pp_layers = parse_layers(c.pp_layers);
  o.comm_timeout_s = c.comm_timeout;
  o.block_size = c.block_size;
  o.max_model_len = c.max_model_len;
  o.max_num_seqs = c.max_num_seqs;
  o.kv_blocks = c.kv_blocks;
  if (!c.kv_cache_memory.empty())
    o.kv_cache_memory = parse_byte_size(c.kv_cache_memory, "--kv-cache-memory");
  o.kv_dtype = parse_kv_dtype(c.kv_dtype);
  o.allow_tp_across_hosts = c.allow_tp_across_hosts;
  o.gpu_memory_utilization = c.gpu_memory_utilization;
  o.config_overrides = c.config_overrides;
  o.preflight = launch_preflight;
  o.command = c.command;
  o.memory_report = launch_memory_report;
  if (c.tp < 1 || c.pp < 1 || c.dp < 1) raise(Err::Usage, "--tp, --pp and --dp must be at least 1");
  // run, logits and bench drive one sequence on one mesh: other replicas would only wait, and
  // time out waiting, for a step that never comes.
  const std::string command = c.command.substr(0, c.command.find(' '));
  if (c.dp > 1 && command != "batch" && command != "serve")
    raise(Err::Usage, "--dp is for batch and serve; `qmpi " + command + "` runs on one mesh",
          "Drop --dp (and launch --tp x --pp ranks), or use qmpi batch or qmpi serve.");
  if (c.block_size < 1) raise(Err::Usage, "--block-size must be at least 1");
  check_engine_limits(c);
  if (c.comm != "auto" && c.comm != "mpi" && c.comm != "nccl")
    raise(Err::Usage, "--comm must be auto, mpi or nccl, not '" + c.comm + "'");

  if (c.backend == "cpu") {
    if (c.comm == "nccl") raise(Err::Usage, "--comm nccl needs --backend cuda");
    if (c.cuda_graphs && !c.enforce_eager) raise(Err::Usage, "--cuda-graphs needs --backend cuda");
    const CpuBackendOptions cpu{c.threads, c.bf16_activations};
    o.make_backend = [cpu](int) { return make_cpu_backend(cpu); };
  } else if (c.backend == "cuda") {
#ifdef QMPI_WITH_CUDA
    o.cuda = true;
    o.allow_device_sharing = c.comm == "mpi";
    o.cuda_graphs = c.cuda_graphs && !c.enforce_eager;
    o.make_backend = [graphs = o.cuda_graphs](int device) {
      return make_cuda_backend(CudaBackendOptions{.device = device, .cuda_graphs = graphs});
    };
    o.size_kv_on_device = size_kv_on_cuda;
    // NCCL by default; --comm mpi stages device buffers through host memory (several ranks
    // may then share one GPU).
    if (c.comm == "mpi")
      o.make_tp_comm = [t = c.comm_timeout](MPI_Comm g, const std::string& label) {
        return make_staged_mpi_comm(g, label, t);
      };
    else
      o.make_tp_comm = make_nccl_comm;
#else
    raise(Err::BackendUnavailable,
          "this qmpi was built without the CUDA backend (no nvcc at build time)");
#endif
  } else {
    raise(Err::Usage, "--backend must be cpu or cuda, not '" + c.backend + "'");
  }
  return o;
}

}  // namespace qmpi
