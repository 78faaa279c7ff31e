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
#include "engine/draft_model_proposer.h"
#include "engine/engine_config.h"
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

class Engine {
 public:
  Engine(MpiRuntime& mpi, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  bool is_driver() const;
  // Non-driver ranks: execute steps until the driver calls shutdown().
  void serve();
  void shutdown();

  const ModelConfig& config() const { return cfg_; }
  const GenerationConfig& generation_config() const { return gen_; }
  const EngineConfig& options() const { return opts_; }
  // The job's scheduler limits with the engine's max_model_len (and a whole prompt per step
  // where max_batched_tokens is 0).
  SchedulerConfig scheduler_config() const;
  Mesh& mesh() { return *mesh_; }
  const Layout& mesh_layout() const { return opts_.parallel.layout; }
  Backend& backend() { return *backend_; }
  Executor& executor() { return *executor_; }
  BlockManager& blocks() { return *blocks_[0]; }  // driver only: rank 0's own replica
  // Driver only, one per data-parallel replica (--dp), replica 0 first: the runner that steps
  // it (rank 0's Executor, or a ReplicaRunner for the others) and its KV block table.
  int replicas() const { return opts_.parallel.layout.dp; }
  std::vector<StepRunner*> replica_runners();
  std::vector<BlockManager*> replica_blocks();
  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t bytes_read() const { return bytes_read_; }
  const MeasuredMemory& measured_memory() const { return measured_; }
  int64_t max_model_len() const { return max_model_len_; }

 private:
  // Sets kv.num_blocks (and measured_): --kv-blocks, the device's budget, or the CPU rule.
  void size_kv_cache(KvCacheShape& kv);

  EngineConfig opts_;
  ModelConfig cfg_;
  GenerationConfig gen_;
  std::unique_ptr<Mesh> mesh_;
  ShardPlan shard_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<TimedComm> world_, tp_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<DraftModelProposer> draft_;                  // driver, with a draft model only
  std::vector<std::unique_ptr<BlockManager>> blocks_;          // driver: one per replica
  std::unique_ptr<ExecutorRunner> own_runner_;                 // driver: replica 0
  std::vector<std::unique_ptr<ReplicaRunner>> other_runners_;  // driver: replicas 1..dp-1
  uint64_t weight_bytes_ = 0, bytes_read_ = 0;
  MeasuredMemory measured_;
  int64_t max_model_len_ = 0;
  bool shut_down_ = false;
};

}  // namespace qmpi
