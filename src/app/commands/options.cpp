#include "app/commands/options.h"

#include "app/commands/kv_dtype_option.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <mpi.h>

#include "core/errors.h"
#include "core/logging.h"
#include "parallel/mesh.h"
#include "parallel/mpi_runtime.h"
#include "parallel/replica_survival.h"

namespace qmpi {

namespace {

// vLLM's spellings of qmpi options, so that a vLLM command line works as typed, and names an
// option had before it took the one every command uses. Each is rewritten to qmpi's name
// before parsing, so one option has one value whichever name set it.
constexpr std::pair<std::string_view, std::string_view> kVllmAliases[] = {
    {"--tensor-parallel-size", "--tp"},
    {"-tp", "--tp"},
    {"--pipeline-parallel-size", "--pp"},
    {"-pp", "--pp"},
    {"--data-parallel-size", "--dp"},
    {"-dp", "--dp"},
    {"--max-num-batched-tokens", "--max-batched-tokens"},
    {"--gpu-util", "--gpu-memory-utilization"},  // `qmpi plan`'s former name
    {"--kv-cache-dtype", "--kv-dtype"},
};

// --pp-layers 27,27,26
std::vector<int> parse_layer_counts(const std::string& s) {
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

Args with_vllm_aliases(const Args& args) {
  Args out;
  out.reserve(args.size());
  for (const std::string& a : args) {
    std::string arg = a;
    for (const auto& [alias, name] : kVllmAliases) {
      if (a == alias) {
        arg = name;
      } else if (a.size() > alias.size() && a.compare(0, alias.size(), alias) == 0 &&
                 a[alias.size()] == '=') {
        arg = std::string(name) + a.substr(alias.size());
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

po::typed_value<double>* decimal_value(double* target, double def) {
  return po::value(target)->default_value(def, decimal_text(def));
}

bool parse_options(const Args& raw_args, const po::options_description& desc, po::variables_map& vm,
                   const std::string& usage_line) {
  po::options_description all(desc);
  std::string log_level;
  all.add_options()("help,h", "show this help")(
      "log-level", po::value(&log_level),
      "debug, info, warn or error (default info, or QMPI_LOG_LEVEL); at info rank 0 logs one "
      "start-up summary, debug adds each rank's own lines");
  const Args args = with_vllm_aliases(raw_args);
  try {
    // `qmpi serve MODEL`, as `vllm serve MODEL`: a bare first argument is the model.
    po::positional_options_description positional;
    if (all.find_nothrow("model", false)) positional.add("model", 1);
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage_line << "\n\n" << all << "\n";
      return false;
    }
    po::notify(vm);
    if (!log_level.empty()) set_log_level(log_level);
  } catch (const po::error& e) {
    raise(Err::Usage, e.what(),
          "Run `" + usage_line.substr(0, usage_line.find(' ', 5)) + " --help` for the options.");
  }
  return true;
}

EngineConfig engine_config_for(Command command) {
  EngineConfig c;
  c.command = command;
  if (command == Command::Batch || command == Command::Serve) c.scheduler = SchedulerConfig{};
  return c;
}

po::options_description engine_options(EngineConfig& c) {
  ModelSource& m = c.model;
  ParallelConfig& par = c.parallel;
  CacheConfig& cache = c.cache;
  BackendConfig& b = c.backend;
  po::options_description d("model and layout");
  d.add_options()("model", po::value(&m.path), "model folder (Hugging Face layout) or .h5 file")(
      "verify", po::bool_switch(&m.verify_checksums),
      "with a .h5 model: check the CRC-32 of every chunk each rank reads")(
      "synthetic-weights", po::bool_switch(&m.synthetic_weights),
      "deterministic random weights from config.json alone, generated per rank for its own "
      "shard (size a cluster before downloading)")("model-config", po::value(&m.config_path),
                                                   "config.json for --synthetic-weights")(
      "seed-weights", po::value(&m.synthetic_seed)->default_value(0),
      "seed of --synthetic-weights")(
      "chat-template", po::value(&m.chat_template),
      "a Jinja chat template file instead of the model's (tokenizer_config.json chat_template)")(
      "tp", po::value(&par.layout.tp)->default_value(1),
      "tensor-parallel size (ranks per stage; vLLM's --tensor-parallel-size, -tp)")(
      "pp", po::value(&par.layout.pp)->default_value(1),
      "pipeline-parallel size (stages; vLLM's --pipeline-parallel-size, -pp)")(
      "dp", po::value(&par.layout.dp)->default_value(1),
      "data-parallel replicas: dp copies of the --tp x --pp mesh in one job (mpirun -np dp*tp*pp), "
      "rank 0 spreading requests over them (batch and serve; vLLM's --data-parallel-size, -dp)")(
      "pp-layers", po::value<std::string>()->notifier([&par](const std::string& s) {
        par.layout.pp_layers = parse_layer_counts(s);
      }),
      "layers per stage, e.g. 27,27,26 (default: even)")(
      "backend", po::value(&b.name)->default_value("cpu"), "cpu or cuda")(
      "comm", po::value(&b.comm)->default_value("auto"),
      "TP communication: auto (NCCL on cuda, MPI on cpu), nccl, or mpi (stages device buffers "
      "through host memory; lets several ranks share one GPU)")(
      "threads", po::value(&b.threads)->default_value(0),
      "CPU threads per rank (0: OpenMP default)")(
      "bf16-activations", po::bool_switch(&b.bf16_activations),
      "CPU, BF16 weights: round activations to bf16 inside matmuls and use bf16 dot products "
      "(faster prefill and batched decode; ~1.5e-3 relative error per matmul, beyond the 2e-3 "
      "end-to-end bound the default float32 path keeps)")(
      "cuda-graphs", po::bool_switch(&b.cuda_graphs),
      "CUDA: record each decode batch size's step as a CUDA graph and replay it (fewer kernel "
      "launches per token; TP 1 dense models; off by default, unlike vLLM, whose "
      "--enforce-eager turns them off)")(
      "enforce-eager", po::bool_switch(&b.enforce_eager),
      "no CUDA graphs, as in vLLM (qmpi's default; wins over --cuda-graphs)")(
      "comm-timeout", decimal_value(&par.comm_timeout_s, 300.0),
      "seconds a collective or receive may wait before the job is aborted with a message "
      "naming the waiting rank and its peer")("block-size",
                                              po::value(&cache.block_size)->default_value(16),
                                              "KV cache block size (tokens)")(
      "max-model-len", po::value(&cache.max_model_len)->default_value(0),
      "longest sequence (prompt + output) in tokens (0: min(max_position_embeddings, 8192))")(
      "max-num-seqs", po::value(&c.scheduler.max_num_seqs)->default_value(c.scheduler.max_num_seqs),
      "most sequences scheduled at once (on CUDA a limit, the KV cache takes what memory is "
      "left; on CPU the cache also holds this many max-model-len sequences)")(
      "kv-blocks", po::value(&cache.kv_blocks)->default_value(0),
      "KV cache blocks per rank (0: on CPU max-num-seqs x max-model-len worth; on CUDA what "
      "--gpu-memory-utilization leaves after the weights and a measured step)")(
      "kv-dtype", kv_dtype_value(&cache.kv_dtype), kKvDtypeHelp)(
      "gpu-memory-utilization", decimal_value(&cache.gpu_memory_utilization, 0.9),
      "fraction of each GPU's memory qmpi may use, KV cache included (CUDA)")(
      "allow-tp-across-hosts", po::bool_switch(&par.allow_tp_across_hosts),
      "let a TP group span hosts (slow; warns instead of failing)");
  return d;
}

po::options_description scheduler_options(EngineConfig& c) {
  SchedulerConfig& s = c.scheduler;
  po::options_description d("scheduling");
  d.add_options()(
      "max-batched-tokens", po::value(&s.max_batched_tokens)->default_value(s.max_batched_tokens),
      "tokens per step (prompt chunks and decodes); longer prompts are prefilled in chunks "
      "(vLLM's --max-num-batched-tokens)")(
      "default-max-tokens", po::value(&c.default_max_tokens)->default_value(0),
      "max_tokens of requests that do not set it (0: 16 for completions, up to "
      "--max-model-len for chat)")(
      "no-prefix-caching", po::bool_switch()->notifier([&s](bool off) { s.prefix_caching = !off; }),
      "do not share KV blocks between requests with the same prompt prefix")(
      "micro-batches", po::value(&s.micro_batches)->default_value(0),
      "steps in flight at once with PP stages (0: one per stage; 1: no micro-batching)");
  return d;
}

void add_reasoning_parser_option(po::options_description& d, std::string& value) {
  d.add_options()("reasoning-parser", po::value(&value),
                  "qwen3: chat answers' text between <think> and </think> becomes the message's "
                  "reasoning_content (streamed as reasoning_content deltas), as vLLM's "
                  "--reasoning-parser qwen3 does; default: off, the text stays in content");
}

bool reasoning_parser_on(const std::string& value) {
  if (value.empty()) return false;
  if (value == "qwen3" || value == "deepseek_r1") return true;  // same <think> markup
  raise(Err::Usage, "--reasoning-parser " + value + " is not a parser qmpi has",
        "Give --reasoning-parser qwen3 (Qwen3's <think>...</think>), or leave it out.");
}

std::vector<int32_t> parse_id_list(const std::string& s, const char* option) {
  std::vector<int32_t> ids;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      raise(Err::Usage, std::string("--") + option + ": '" + item + "' is not a token id",
            std::string("Give ids as a comma-separated list, e.g. --") + option + " 1,2,3");
    }
  }
  if (ids.empty()) raise(Err::Usage, std::string("--") + option + " is empty");
  return ids;
}

namespace {

// In a job that survives lost replicas no rank may finalize MPI (MpiRuntime::end_job).
int end_engine(const MpiRuntime& mpi, Engine& engine, int rc) {
  if (engine.mesh().dp() > 1 && replica_survival_enabled()) mpi.end_job(rc);
  return rc;
}

}  // namespace

int run_engine(const EngineConfig& config, const std::function<int(Engine&)>& driver) {
  MpiRuntime mpi;
  std::unique_ptr<Engine> engine;
  try {
    engine = std::make_unique<Engine>(mpi, config);
    int rc = 0;
    if (engine->is_driver()) {
      rc = driver(*engine);
      engine->shutdown();
    } else {
      engine->serve();
    }
    return end_engine(mpi, *engine, rc);
  } catch (const std::exception& failure) {
    // Not one of ours (a library's exception): still this rank's failure, and the other ranks
    // must hear about it the same way, never wait for a step that does not come.
    const auto* ours = dynamic_cast<const Error*>(&failure);
    const Error e = ours ? *ours : Error(Err::Internal, failure.what());
    const bool deterministic =
        !engine && (error_entry(e.code()).exit_code == 2 || e.code() == Err::ConfigInvalid ||
                    e.code() == Err::ConfigKeyMissing || e.code() == Err::ArchUnsupported ||
                    e.code() == Err::ModelDirMissing || e.code() == Err::H5Format);
    if (mpi.size() == 1 || deterministic) {
      if (mpi.rank() == 0) std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
      return e.exit_code();
    }
    // The driver failed on its own input (a prompt too long, a bad option value): the other
    // ranks are waiting for the next step, so release them before exiting.
    if (engine && engine->is_driver()) {
      std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
      engine->shutdown();
      return end_engine(mpi, *engine, e.exit_code());
    }
    mpi.abort_job(e);
  }
  return 0;
}

}  // namespace qmpi
