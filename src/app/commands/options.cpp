#include "app/commands/options.h"

#include "app/commands/dtype_option.h"
#include "app/commands/kv_dtype_option.h"
#include "app/commands/lora_options.h"
#include "app/commands/vllm_flags.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <mpi.h>
#include <spdlog/spdlog.h>

#include "core/byte_size.h"
#include "core/errors.h"
#include "core/logging.h"
#include "parallel/launcher.h"
#include "parallel/mesh.h"
#include "parallel/mpi_runtime.h"
#include "parallel/replica_survival.h"

namespace qmpi {

namespace {

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

po::typed_value<double>* decimal_value(double* target, double def) {
  return po::value(target)->default_value(def, decimal_text(def));
}

bool parse_options(const Args& raw_args, const po::options_description& desc, po::variables_map& vm,
                   const std::string& usage_line) {
  po::options_description all(desc);
  all.add_options()("help,h", "show this help")(
      "log-level", po::value<std::string>(),
      "debug, info, warn or error (default info, or QMPI_LOG_LEVEL); at info rank 0 logs one "
      "start-up summary, debug adds each rank's own lines");
  const VllmRewrite vllm = with_vllm_aliases(raw_args, all);
  const std::string help_hint =
      "Run `" + usage_line.substr(0, usage_line.find(' ', 5)) + " --help` for the options.";
  if (!vllm.unknown.empty()) {
    std::string list;
    for (const std::string& u : vllm.unknown) list += (list.empty() ? "" : ", ") + u;
    raise(Err::Usage,
          std::string(vllm.unknown.size() == 1 ? "unknown option: " : "unknown options: ") + list,
          help_hint + " docs/vllm-compat.md lists vLLM's flags and what qmpi does with each.");
  }
  try {
    // `qmpi serve MODEL`, as `vllm serve MODEL`: a bare first argument is the model.
    po::positional_options_description positional;
    if (all.find_nothrow("model", false)) positional.add("model", 1);
    po::store(po::command_line_parser(vllm.args).options(all).positional(positional).run(), vm);
    if (vm.count("log-level")) set_log_level(vm["log-level"].as<std::string>());
    if (launcher_rank() == 0)
      for (const std::string& note : vllm.notes) spdlog::info("vLLM's {}", note);
    if (vm.count("help")) {
      std::cout << "usage: " << usage_line << "\n\n" << all << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    raise(Err::Usage, e.what(), help_hint);
  }
  return true;
}

EngineConfig engine_config_for(Command command) {
  EngineConfig c;
  c.command = command;
  if (command == Command::Batch || command == Command::Serve || command == Command::Bench)
    c.scheduler = SchedulerConfig{};
  return c;
}

po::options_description engine_options(EngineConfig& c) {
  ModelSource& m = c.model;
  ParallelConfig& par = c.parallel;
  CacheConfig& cache = c.cache;
  BackendConfig& b = c.backend;
  po::options_description d("model and layout");
  d.add_options()("model", po::value(&m.path),
                  "model folder (Hugging Face layout), .h5 file, or .gguf file (the first part of "
                  "a split one)")(
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
      "chat-template-limits", po::value(&m.chat_template_limits),
      "raise the chat template's sandbox limits, e.g. steps=20000000,loop=5000000,depth=400,"
      "render-depth=200,output=256MiB (defaults: docs/user-guide.md)")(
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
      "CPU threads per rank (0: OpenMP default)")("dtype", activation_dtype_value(&b.activations),
                                                  kActivationDtypeHelp)(
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
      "longest sequence (prompt + output) in tokens (0: as vLLM derives it: "
      "max_position_embeddings, times rope_scaling's factor; YaRN: "
      "original_max_position_embeddings x factor)")(
      "max-num-seqs", po::value(&c.scheduler.max_num_seqs)->default_value(c.scheduler.max_num_seqs),
      "most sequences scheduled at once (a limit: the KV cache takes its memory budget, not "
      "this many max-model-len sequences)")(
      "kv-blocks", po::value(&cache.kv_blocks)->default_value(0),
      "KV cache blocks per rank (0: on CPU what --kv-cache-memory holds; on CUDA what "
      "--gpu-memory-utilization leaves after the weights and a measured step)")(
      "kv-cache-memory", po::value<std::string>()->notifier([&cache](const std::string& s) {
        cache.kv_cache_memory = parse_byte_size(s, "--kv-cache-memory");
      }),
      "CPU: memory per rank the KV cache may grow to, e.g. 8GiB; blocks take memory as "
      "sequences write them and preemption (recompute) starts when it is full (default: 40% "
      "of MemAvailable shared by the host's ranks, at most max-num-seqs x max-model-len)")(
      "kv-dtype", kv_dtype_value(&cache.kv_dtype), kKvDtypeHelp)(
      "gpu-memory-utilization", decimal_value(&cache.gpu_memory_utilization, 0.9),
      "fraction of each GPU's memory qmpi may use, KV cache included (CUDA)")(
      "allow-tp-across-hosts", po::bool_switch(&par.allow_tp_across_hosts),
      "let a TP group span hosts (slow; warns instead of failing)");
  add_config_override_options(d, m.overrides);
  d.add(lora_options(c.lora));
  return d;
}

void add_config_override_options(po::options_description& d, ConfigOverrides& o) {
  d.add_options()("hf-overrides", po::value(&o.hf_overrides),
                  "a JSON object merged into config.json, e.g. '{\"max_position_embeddings\": "
                  "65536}' (vLLM's --hf-overrides)")(
      "rope-scaling", po::value(&o.rope_scaling),
      "a JSON object that replaces config.json's rope_scaling, e.g. '{\"rope_type\": \"yarn\", "
      "\"factor\": 4.0, \"original_max_position_embeddings\": 32768}' (yarn, linear or dynamic; "
      "vLLM's --rope-scaling)");
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
      "steps in flight at once with PP stages (0: one per stage; 1: no micro-batching)")(
      "speculative-config", po::value<std::string>()->notifier([&s](const std::string& json) {
        s.speculative = parse_speculative_config(json);
      }),
      kSpeculativeConfigHelp);
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
                    e.code() == Err::ModelDirMissing || e.code() == Err::H5Format ||
                    // every rank checks every adapter whole (model/lora_loader.h)
                    (e.code() >= Err::LoraAdapterUnreadable && e.code() <= Err::LoraOptionInvalid));
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
