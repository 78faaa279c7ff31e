// Everything one rank needs to run a model, built once at start in this order: config ->
// pre-flight checks -> Mesh (placement, comms) -> Backend -> this rank's weights -> KV cache
// -> Executor. Rank 0 (the driver) then plans steps; every other rank serves them.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <mpi.h>

#include "backend/backend.h"
#include "engine/block_manager.h"
#include "engine/device_memory.h"
#include "engine/executor.h"
#include "engine/replica_runner.h"
#include "engine/scheduler.h"
#include "engine/timed_comm.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/shard_plan.h"
#include "parallel/comm.h"

namespace qmpi {

class Mesh;
class MpiRuntime;

struct EngineOptions {
  std::string model_path;          // HF folder or .h5
  bool verify_checksums = false;   // .h5: check the CRC-32 of every chunk this rank reads
  bool synthetic_weights = false;  // random weights from the config alone (per-rank slices)
  std::string model_config;        // config.json for synthetic weights (else model_path's)
  uint64_t synthetic_seed = 0;
  Layout layout;
  bool cuda = false;
  bool cuda_graphs = false;  // the backend records decode steps (said once if the model cannot)
  bool allow_device_sharing = false;  // several ranks per GPU (--comm mpi)
  bool allow_tp_across_hosts = false;
  double comm_timeout_s = 300.0;
  double gpu_memory_utilization = 0.9;
  ConfigOverrides config_overrides;  // --hf-overrides, --rope-scaling
  int block_size = 16;
  int64_t max_model_len = 0;  // 0: ModelConfig::derived_max_model_len()
  int64_t max_num_seqs = 1;
  // 0: on CPU what kv_cache_memory holds (at most max_num_seqs sequences of max_model_len); on
  // a device backend with size_kv_on_device, what --gpu-memory-utilization leaves after the
  // weights and workspace.
  int64_t kv_blocks = 0;
  // CPU: bytes the KV cache may grow to per rank (0: kCpuKvMemoryShare of MemAvailable over
  // this host's ranks); ignored with kv_blocks.
  uint64_t kv_cache_memory = 0;
  DType kv_dtype = DType::BF16;  // the KV cache's elements: F32, BF16 or F8_E4M3
  // Tokens of the largest step (batch, serve: --max-batched-tokens); 0: a whole prompt of
  // max_model_len in one step (run, bench, logits). The workspace is measured at this size.
  int64_t max_step_tokens = 0;
  // Chosen by the app (it links the CUDA backend when built): the backend for this rank and,
  // optionally, the TP group's comm (NCCL); null means the MPI comm.
  std::function<std::unique_ptr<Backend>(int device)> make_backend;
  std::function<std::unique_ptr<Comm>(MPI_Comm group, const std::string& label)> make_tp_comm;
  // The planner's pre-flight check (layout rules and memory budget), run on every rank once
  // the mesh and the device are known and before any weight is read; raises its error.
  std::function<void(const ModelConfig&, const Mesh&, const EngineOptions&)> preflight;
  std::string command = "run";  // the qmpi command, as the pre-flight's suggestions repeat it
  // Device backends: sizes the KV cache from the device's memory (engine/device_memory.h) when
  // kv_blocks is 0. Null: the CPU rule above.
  DeviceKvSizer size_kv_on_device;
  // This rank's start-up line, the planner's prediction next to what was measured; logged by
  // every rank once its KV cache is allocated. Null: no line.
  std::function<std::string(const ModelConfig&, const Mesh&, const EngineOptions&,
                            const MeasuredMemory&)>
      memory_report;
};

class Engine {
 public:
  Engine(MpiRuntime& mpi, const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  bool is_driver() const;
  // Non-driver ranks: execute steps until the driver calls shutdown().
  void serve();
  void shutdown();

  const ModelConfig& config() const { return cfg_; }
  const GenerationConfig& generation_config() const { return gen_; }
  const EngineOptions& options() const { return opts_; }
  Mesh& mesh() { return *mesh_; }
  const Layout& mesh_layout() const { return opts_.layout; }
  Backend& backend() { return *backend_; }
  Executor& executor() { return *executor_; }
  BlockManager& blocks() { return *blocks_[0]; }  // driver only: rank 0's own replica
  // Driver only, one per data-parallel replica (--dp), replica 0 first: the runner that steps
  // it (rank 0's Executor, or a ReplicaRunner for the others) and its KV block table.
  int replicas() const { return opts_.layout.dp; }
  std::vector<StepRunner*> replica_runners();
  std::vector<BlockManager*> replica_blocks();
  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t bytes_read() const { return bytes_read_; }
  const MeasuredMemory& measured_memory() const { return measured_; }
  int64_t max_model_len() const { return max_model_len_; }

 private:
  // Sets kv.num_blocks (and measured_): --kv-blocks, the device's budget, or the CPU rule.
  void size_kv_cache(KvCacheShape& kv);

  EngineOptions opts_;
  ModelConfig cfg_;
  GenerationConfig gen_;
  std::unique_ptr<Mesh> mesh_;
  ShardPlan shard_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<TimedComm> world_, tp_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::unique_ptr<BlockManager>> blocks_;          // driver: one per replica
  std::unique_ptr<ExecutorRunner> own_runner_;                 // driver: replica 0
  std::vector<std::unique_ptr<ReplicaRunner>> other_runners_;  // driver: replicas 1..dp-1
  uint64_t weight_bytes_ = 0, bytes_read_ = 0;
  MeasuredMemory measured_;
  int64_t max_model_len_ = 0;
  bool shut_down_ = false;
};

}  // namespace qmpi
