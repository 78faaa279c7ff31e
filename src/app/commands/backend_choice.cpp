// Turns the command line into EngineOptions, choosing the backend and the TP comm. The only
// place that knows whether the CUDA backend was built.
#include <sstream>

#include "app/commands/options.h"
#include "backend/cpu/cpu_backend.h"
#include "plan/errors.h"
#ifdef QMPI_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "dist/nccl/comm_nccl.h"
#include "dist/nccl/comm_staged_mpi.h"
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

}  // namespace

EngineOptions to_engine_options(const EngineCli& c) {
  EngineOptions o;
  o.model_path = c.model;
  o.verify_checksums = c.verify;
  o.synthetic_weights = c.synthetic;
  o.model_config = c.model_config;
  o.synthetic_seed = c.seed;
  o.layout.tp = c.tp;
  o.layout.pp = c.pp;
  if (!c.pp_layers.empty()) o.layout.pp_layers = parse_layers(c.pp_layers);
  o.comm_timeout_s = c.comm_timeout;
  o.block_size = c.block_size;
  o.max_model_len = c.max_model_len;
  o.max_num_seqs = c.max_num_seqs;
  o.kv_blocks = c.kv_blocks;
  o.allow_tp_across_hosts = c.allow_tp_across_hosts;
  o.gpu_memory_utilization = c.gpu_memory_utilization;
  o.preflight = launch_preflight;
  if (c.tp < 1 || c.pp < 1) raise(Err::Usage, "--tp and --pp must be at least 1");
  if (c.block_size < 1) raise(Err::Usage, "--block-size must be at least 1");
  if (c.comm != "auto" && c.comm != "mpi" && c.comm != "nccl")
    raise(Err::Usage, "--comm must be auto, mpi or nccl, not '" + c.comm + "'");

  if (c.backend == "cpu") {
    if (c.comm == "nccl") raise(Err::Usage, "--comm nccl needs --backend cuda");
    const int threads = c.threads;
    o.make_backend = [threads](int) { return make_cpu_backend(CpuBackendOptions{threads}); };
  } else if (c.backend == "cuda") {
#ifdef QMPI_WITH_CUDA
    o.cuda = true;
    o.allow_device_sharing = c.comm == "mpi";
    o.make_backend = [](int device) { return make_cuda_backend(CudaBackendOptions{device}); };
    // NCCL by default; --comm mpi stages device buffers through host memory (several ranks
    // may then share one GPU).
    if (c.comm == "mpi")
      o.make_tp_comm = [t = c.comm_timeout](MPI_Comm g, const std::string& label) {
        return make_staged_mpi_comm(g, label, t);
      };
    else
      o.make_tp_comm = make_nccl_comm;
#else
    raise(Err::BackendUnavailable, "this qmpi was built without the CUDA backend (no nvcc at build time)");
#endif
  } else {
    raise(Err::Usage, "--backend must be cpu or cuda, not '" + c.backend + "'");
  }
  return o;
}

}  // namespace qmpi
