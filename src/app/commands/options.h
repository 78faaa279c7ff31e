// Option parsing shared by the subcommands: Boost.Program_options with catalogue errors, and
// the options every engine command takes (model, layout, backend, cache, timeouts).
#pragma once
#include <functional>
#include <string>

#include <boost/program_options.hpp>

#include "app/commands/commands.h"
#include "core/errors.h"
#include "engine/engine.h"
#include "engine/scheduler.h"

namespace qmpi {

namespace po = boost::program_options;

// `args` with vLLM's option names (--tensor-parallel-size, -tp, --pipeline-parallel-size, -pp,
// --max-num-batched-tokens; also as --name=value) and qmpi's former names (--gpu-util)
// rewritten to qmpi's.
Args with_vllm_aliases(const Args& args);

// `v` as people write it: the shortest text that reads back as v ("0.9", "300").
std::string decimal_text(double v);
// An option's value with `def` as its default, shown in --help as decimal_text writes it
// (Boost would print 0.9 as 0.90000000000000002).
po::typed_value<double>* decimal_value(double* target, double def);

// Parses `args` (vLLM's names accepted, see above); prints help and returns false for --help.
// Bad options raise Err::Usage.
bool parse_options(const Args& args, const po::options_description& desc, po::variables_map& vm,
                   const std::string& usage_line);

struct EngineCli {
  std::string model;
  bool verify = false;
  std::string model_config;
  std::string chat_template;  // a Jinja file instead of the model's chat_template
  bool synthetic = false;
  uint64_t seed = 0;
  int tp = 1;
  int pp = 1;
  int dp = 1;  // data-parallel replicas
  std::string pp_layers;
  std::string backend = "cpu";
  std::string comm = "auto";
  int threads = 0;
  bool bf16_activations = false;  // CPU: bf16 dot products in matmuls (off: exact float32)
  bool cuda_graphs = false;       // CUDA: record decode steps as graphs and replay them
  bool enforce_eager = false;     // vLLM's switch for no graphs: wins over cuda_graphs
  double comm_timeout = 300.0;
  int block_size = 16;
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 1;
  int64_t kv_blocks = 0;
  std::string kv_cache_memory;  // a byte size; empty: the default share of MemAvailable
  std::string kv_dtype = "bf16";
  bool allow_tp_across_hosts = false;
  double gpu_memory_utilization = 0.9;
  ConfigOverrides config_overrides;
  // Not an option: the command as the pre-flight's suggested launch line repeats it, with what
  // it needs besides the model and layout, e.g. "batch --input in.jsonl --output out.jsonl".
  std::string command = "run";
};

// The options bind to `cli`, whose values on entry are the defaults --help shows.
po::options_description engine_options(EngineCli& cli);
// --hf-overrides and --rope-scaling (vLLM's), for every command that reads config.json.
void add_config_override_options(po::options_description& d, ConfigOverrides& o);

// The scheduler options `batch` and `serve` share.
struct SchedulerCli {
  int64_t max_batched_tokens = 2048;
  int64_t default_max_tokens = 0;
  bool no_prefix_caching = false;
  int64_t micro_batches = 0;
};
po::options_description scheduler_options(SchedulerCli& s);
// --max-num-seqs of batch and serve when not given (run's is 1): set it in EngineCli before
// engine_options(), which shows it in --help.
inline constexpr int64_t kSchedulerMaxNumSeqs = 16;
// batch and serve, once the command line is parsed: the scheduler takes its limits from both
// option groups.
SchedulerConfig to_scheduler_config(const EngineCli& cli, const SchedulerCli& s);
// --reasoning-parser (batch and serve): vLLM's switch for returning Qwen3's <think> text as
// reasoning_content. reasoning_parser_on() raises Usage for a parser other than qwen3.
void add_reasoning_parser_option(po::options_description& d, std::string& value);
bool reasoning_parser_on(const std::string& value);
EngineOptions to_engine_options(const EngineCli& cli);
// batch and serve: the engine also learns their largest step (--max-batched-tokens).
EngineOptions to_engine_options(const EngineCli& cli, const SchedulerCli& sched);
// EngineOptions::preflight and ::memory_report for launches (src/app/commands/preflight_hook.cpp).
void launch_preflight(const ModelConfig& cfg, const Mesh& mesh, const EngineOptions& o);
std::string launch_memory_report(const ModelConfig& cfg, const Mesh& mesh, const EngineOptions& o,
                                 const MeasuredMemory& measured);

// Starts MPI and the engine on every rank, runs `driver` on rank 0 while the others serve
// steps, and shuts down. Errors: deterministic ones (layout, config) are printed once by rank
// 0 and every rank exits with the code; a rank-local failure is printed by that rank with its
// rank and host, and the whole job is aborted (no rank is left waiting).
int run_engine(const EngineOptions& opts, const std::function<int(Engine&)>& driver);

// The exit code of a batch or serve job that finished: 0, or QM414's (printed, naming each
// replica lost on the way and why) when it ended on fewer replicas than it started with.
int replica_loss_exit_code(const SequenceScheduler& sched);

// "1,2,3" -> ids
std::vector<int32_t> parse_id_list(const std::string& s, const char* option);

}  // namespace qmpi
