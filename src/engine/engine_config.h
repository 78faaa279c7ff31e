// The one configuration of an engine job, parsed once from the command line (app/commands/
// options.cpp binds every option to a member here) and passed by const reference to the Mesh
// (its ParallelConfig), the pre-flight and the memory report, and the Engine. Adding an option:
// a member in the sub-config it belongs to, and one line in engine_options() or
// scheduler_options() that binds it (plus a check in check_engine_config when a value can be
// out of range).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <mpi.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "engine/device_memory.h"
#include "engine/sequence_scheduler.h"
#include "model/config.h"
#include "model/lora_config.h"
#include "parallel/comm.h"
#include "parallel/mesh.h"

namespace qmpi {

// The commands that start an engine. Only batch and serve drive several replicas (--dp).
enum class Command : uint8_t { Run, Logits, Bench, Batch, Serve };
std::string_view command_name(Command c);

// run, logits and bench: one sequence, its whole prompt in one step, no prefix caching.
SchedulerConfig single_sequence_scheduler();

// Where the weights and the config come from.
struct ModelSource {
  std::string path;                // --model: HF folder, .h5 or .gguf
  bool verify_checksums = false;   // .h5: check the CRC-32 of every chunk this rank reads
  bool synthetic_weights = false;  // random weights from the config alone (per-rank slices)
  std::string config_path;         // --model-config: config.json for synthetic weights
  uint64_t synthetic_seed = 0;
  std::string chat_template;         // --chat-template: a Jinja file instead of the model's
  std::string chat_template_limits;  // --chat-template-limits: jinja::parse_limits' text
  ConfigOverrides overrides;         // --hf-overrides, --rope-scaling: merged into config.json

  // The folder or file the tokenizer, config and generation_config.json are found by: --model,
  // else --model-config.
  const std::string& files() const { return path.empty() ? config_path : path; }
  // How suggested launch lines name the model.
  std::string launch_arg() const;
};

struct CacheConfig {
  int block_size = 16;
  int64_t max_model_len = 0;  // 0: ModelConfig::derived_max_model_len()
  // 0: on CPU what kv_cache_memory holds (at most max_num_seqs sequences of max_model_len); on
  // a device backend with size_kv_on_device, what gpu_memory_utilization leaves after the
  // weights and workspace.
  int64_t kv_blocks = 0;
  // CPU: bytes the KV cache may grow to per rank (0: kCpuKvMemoryShare of MemAvailable over
  // this host's ranks); ignored with kv_blocks.
  uint64_t kv_cache_memory = 0;
  DType kv_dtype = DType::BF16;  // the KV cache's elements: F32, BF16 or F8_E4M3
  double gpu_memory_utilization = 0.9;
};

// --dtype: the activations' type inside matmuls of bf16 weights. Auto and BFloat16 both round
// them to bf16 for bf16 dot products (the weights stay in the checkpoint's dtype: float32 and
// float16 weights keep float32 activations either way; int4 and fp8 ones take bf16 activations
// on enough rows, decoded to bf16 exactly (kernels/cpu/matmul_int4.h, matmul_fp8.cpp); GGUF
// Q8_0/Q4_0/Q5_0/Q4_K/Q6_K decode quantizes them to int8); Float32 is the exact path.
enum class ActivationDtype { Auto, BFloat16, Float32 };

// The backend as asked for on the command line, and what the app chose from it
// (app/commands/backend_choice.cpp, the only place that knows whether CUDA was built).
struct BackendConfig {
  std::string name = "cpu";   // cpu or cuda
  std::string comm = "auto";  // the TP comm: auto, mpi or nccl
  int threads = 0;            // CPU threads per rank (0: OpenMP's default)
  ActivationDtype activations = ActivationDtype::Auto;  // --dtype
  bool cuda_graphs = false;    // CUDA: record decode steps as graphs and replay them
  bool enforce_eager = false;  // vLLM's switch for no graphs: wins over cuda_graphs

  // Chosen: the backend for this rank and, optionally, the TP group's comm (NCCL; null: MPI).
  std::function<std::unique_ptr<Backend>(int device)> make_backend;
  std::function<std::unique_ptr<Comm>(MPI_Comm group, const std::string& label)> make_tp_comm;
  // Device backends: sizes the KV cache from the device's memory when kv_blocks is 0. Null:
  // the CPU rule.
  DeviceKvSizer size_kv_on_device;

  bool graphs() const { return cuda_graphs && !enforce_eager; }
  bool bf16_activations() const { return activations != ActivationDtype::Float32; }
};

struct EngineConfig {
  Command command = Command::Run;
  // What the pre-flight's suggested launch line repeats besides the command, the model and the
  // layout, e.g. "--input in.jsonl --output out.jsonl".
  std::string command_args;
  ModelSource model;
  ParallelConfig parallel;
  CacheConfig cache;
  // max_num_seqs and max_batched_tokens also size the engine; max_batched_tokens 0 (run,
  // logits) is a whole max_model_len prompt in one step. max_model_len is the engine's.
  SchedulerConfig scheduler = single_sequence_scheduler();
  BackendConfig backend;
  // LoRA adapters loaded at start-up (--lora-modules and its limits).
  LoraOptions lora;
  int64_t default_max_tokens = 0;  // batch, serve: max_tokens of requests that do not say

  // The planner's pre-flight check (layout rules and memory budget), run on every rank once
  // the mesh and the device are known and before any weight is read; raises its error.
  std::function<void(const ModelConfig&, const Mesh&, const EngineConfig&)> preflight;
  // This rank's start-up line, the planner's prediction next to what was measured; logged by
  // every rank once its KV cache is allocated. Null: no line.
  std::function<std::string(const ModelConfig&, const Mesh&, const EngineConfig&,
                            const MeasuredMemory&)>
      memory_report;

  // "batch --input a --output b": the command as a suggested launch line repeats it.
  std::string launch_command() const;
};

}  // namespace qmpi
