// `qmpi plan`: which TP x PP layouts can run a model on N GPUs, what each rank needs, and the
// layout to launch — from config.json (and the safetensors headers when present) alone: no
// weights, no GPU, no MPI. Exits 0 when something fits; otherwise with the catalogue's code.
#include <cstdio>
#include <iostream>

#include "app/commands/commands.h"
#include "app/commands/dtype_option.h"
#include "app/commands/kv_dtype_option.h"
#include "app/commands/options.h"
#include "core/byte_size.h"
#include "engine/speculative_config.h"
#include "plan/checkpoint_dtypes.h"
#include "plan/draft_memory.h"
#include "plan/plan_report.h"
#include "plan/plan_svg.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

struct PlanCli {
  std::string model, model_config;
  int gpus = 0, nodes = 1, tp = 0, pp = 0, dp = 0;
  std::string gpu_mem, host_mem, backend = "cuda", pp_layers, kv_cache_memory;
  DType kv_dtype = DType::BF16;
  double gpu_util = kDefaultGpuUtil;
  int64_t max_model_len = 0, max_num_seqs = 0, max_seqs = 0, kv_blocks = 0;
  // The suggested `qmpi serve` prefills in chunks of this many tokens: its largest step, whose
  // activations the plan counts (not a whole max-model-len prompt).
  int64_t max_batched_tokens = SchedulerConfig{}.max_batched_tokens;
  int block_size = 16;
  int64_t max_loras = 0, max_lora_rank = LoraOptions{}.max_lora_rank;
  ActivationDtype dtype = ActivationDtype::Auto;
  bool json = false;
  std::string svg;  // also draw the plan into this file
  ConfigOverrides overrides;
  std::string speculative;  // --speculative-config: a draft model costs rank 0 its memory
};

void write_svg(const std::string& path, const std::string& svg) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  const bool ok = f && std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  if ((f && std::fclose(f) != 0) || !ok)
    raise(Err::OutputFile, "cannot write the plan picture to " + path,
          "Check that the folder exists and is writable.");
}

bool one_layout(const PlanCli& c) {
  return c.tp || c.pp || c.dp;
}

PlanInputs to_inputs(const PlanCli& c) {
  PlanInputs in;
  if (c.backend != "cuda" && c.backend != "cpu")
    raise(Err::Usage, "--backend '" + c.backend + "' is not cuda or cpu");
  in.backend = c.backend == "cuda" ? BackendKind::Cuda : BackendKind::Cpu;
  const int layout_ranks = std::max(c.dp, 1) * std::max(c.tp, 1) * std::max(c.pp, 1);
  in.gpus = c.gpus > 0 ? c.gpus : (one_layout(c) ? layout_ranks : 0);
  if (in.gpus < 1) raise(Err::Usage, "--gpus is required (the GPUs, or CPU ranks, to plan for)");
  if (one_layout(c) && layout_ranks > in.gpus)
    raise(Err::Usage, (c.dp > 1 ? "--dp " + std::to_string(c.dp) + " " : std::string()) + "--tp " +
                          std::to_string(std::max(c.tp, 1)) + " --pp " +
                          std::to_string(std::max(c.pp, 1)) + " needs " +
                          std::to_string(layout_ranks) + " GPUs but --gpus is " +
                          std::to_string(in.gpus));
  in.nodes = c.nodes;
  if (in.nodes < 1 || in.gpus % in.nodes != 0)
    raise(Err::Usage, "--nodes " + std::to_string(c.nodes) + " must divide --gpus " +
                          std::to_string(in.gpus) + " (the same number of GPUs on every node)");
  if (in.backend == BackendKind::Cuda) {
    if (c.gpu_mem.empty())
      raise(Err::Usage, "--gpu-mem is required with --backend cuda",
            "Give the memory of one GPU, e.g. --gpu-mem 24GiB or --gpu-mem 80GB.");
    std::string note;
    in.gpu_mem = parse_gpu_memory(c.gpu_mem, "--gpu-mem", note);
    if (!note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
  } else {
    in.host_mem =
        c.host_mem.empty() ? host_available_memory() : parse_byte_size(c.host_mem, "--host-mem");
    if (in.host_mem == 0)
      raise(Err::Usage, "cannot read MemAvailable from /proc/meminfo",
            "Give the host memory, e.g. --host-mem 256GiB.");
  }
  if (!(c.gpu_util > 0.0 && c.gpu_util <= 1.0))
    raise(Err::Usage, "--gpu-memory-utilization " + decimal_text(c.gpu_util) + " is not in (0, 1]");
  in.gpu_util = c.gpu_util;
  if (c.max_model_len < 0) raise(Err::Usage, "--max-model-len must not be negative");
  in.max_model_len = c.max_model_len;
  in.max_step_tokens = c.max_batched_tokens;
  if (c.max_num_seqs && c.max_seqs && c.max_num_seqs != c.max_seqs)
    raise(Err::Usage, "--max-seqs and --max-num-seqs disagree; give one");
  in.max_num_seqs = std::max<int64_t>(c.max_num_seqs ? c.max_num_seqs : c.max_seqs, 1);
  if (c.block_size < 1) raise(Err::Usage, "--block-size must be at least 1");
  in.block_size = c.block_size;
  in.kv_blocks = c.kv_blocks;
  if (!c.kv_cache_memory.empty()) {
    if (in.backend != BackendKind::Cpu)
      raise(Err::Usage, "--kv-cache-memory sizes the CPU backend's KV cache",
            "On CUDA the KV cache takes what --gpu-memory-utilization leaves.");
    in.kv_cache_memory = parse_byte_size(c.kv_cache_memory, "--kv-cache-memory");
  }
  in.kv_dtype = c.kv_dtype;
  if (c.max_loras < 0 || c.max_lora_rank < 1)
    raise(Err::Usage, "--max-loras must not be negative and --max-lora-rank must be at least 1");
  in.max_loras = c.max_loras;
  in.max_lora_rank = c.max_lora_rank;
  in.bf16_activations = c.dtype != ActivationDtype::Float32;
  in.model_arg = c.model.empty() ? "--model MODEL_DIR" : "--model " + c.model;
  // The suggested launch must read the config as planned.
  if (!c.overrides.hf_overrides.empty())
    in.model_arg += " --hf-overrides '" + c.overrides.hf_overrides + "'";
  if (!c.overrides.rope_scaling.empty())
    in.model_arg += " --rope-scaling '" + c.overrides.rope_scaling + "'";
  const SpeculativeConfig spec = parse_speculative_config(c.speculative);
  in.speculative_tokens = spec.num_tokens;
  add_draft_model(in, spec.model);
  if (spec.enabled()) in.model_arg += " --speculative-config '" + c.speculative + "'";
  return in;
}

// The config.json a failed ModelConfig::load was reading, for sizing what qmpi cannot run.
void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// --tp/--pp/--dp given: that layout rank by rank, then the launch's own verdict.
int explain_layout(const PlanCli& c, const ModelConfig& cfg, const PlanInputs& in) {
  Layout layout{std::max(c.tp, 1), std::max(c.pp, 1), {}};
  layout.dp = std::max(c.dp, 1);
  if (!c.pp_layers.empty())
    for (int32_t n : parse_id_list(c.pp_layers, "pp-layers")) layout.pp_layers.push_back(n);
  const LayoutVerdict v = evaluate_layout(cfg, layout, in);
  print(c.json ? layout_json(cfg, v, in).dump(2) + "\n" : render_layout_text(cfg, v, in));
  if (!c.svg.empty()) {
    PlanResult one;
    one.inputs = in;
    one.layouts = {v};
    one.best = v.valid && v.fits ? 0 : -1;
    write_svg(c.svg, render_plan_svg(cfg, one));
  }
  preflight(cfg, layout, in);  // the launch's own verdict, with the planner's way out
  return 0;
}

}  // namespace

int cmd_plan(const Args& args) {
  PlanCli c;
  po::options_description desc("plan");
  // clang-format off
  desc.add_options()
      ("model", po::value(&c.model), "model folder (config.json; safetensors headers if present)")
      ("model-config", po::value(&c.model_config), "a config.json file instead of --model")
      ("gpus", po::value(&c.gpus), "GPUs (or CPU ranks with --backend cpu) to plan for")
      ("gpu-mem", po::value(&c.gpu_mem), "memory of one GPU, e.g. 24GiB, 80GB (80 or 80G: 80GB)")
      ("nodes", po::value(&c.nodes)->default_value(1), "hosts the GPUs are spread over, evenly")
      ("max-model-len", po::value(&c.max_model_len)->default_value(0),
       "longest sequence in tokens (0: as qmpi serve derives it from config.json)")
      ("max-num-seqs", po::value(&c.max_num_seqs),
       "most sequences at once (1); reserves KV cache on cpu only, on cuda the cache takes the "
       "memory left after one --max-model-len sequence")
      ("max-seqs", po::value(&c.max_seqs), "same as --max-num-seqs")
      ("max-batched-tokens", po::value(&c.max_batched_tokens)->default_value(c.max_batched_tokens),
       "tokens per step of the server planned for (prompts are prefilled in chunks of it)")
      ("kv-dtype", kv_dtype_value(&c.kv_dtype), kKvDtypeHelp)
      ("gpu-memory-utilization", decimal_value(&c.gpu_util, kDefaultGpuUtil),
       "fraction of each GPU's memory to plan with (also --gpu-util)")
      ("backend", po::value(&c.backend)->default_value("cuda"),
       "cuda (budget: --gpu-mem x --gpu-memory-utilization) or cpu (budget: host memory / ranks per host)")
      ("host-mem", po::value(&c.host_mem),
       "memory per host for --backend cpu (default: MemAvailable)")
      ("block-size", po::value(&c.block_size)->default_value(16), "KV cache block (tokens)")
      ("kv-cache-memory", po::value(&c.kv_cache_memory),
       "cpu: the KV cache's memory per rank, as serve takes it (default 40% of the host's)")
      ("kv-blocks", po::value(&c.kv_blocks)->default_value(0),
       "KV cache blocks per rank (0: cuda the memory left, cpu max-num-seqs x max-model-len)")
      ("tp", po::value(&c.tp), "explain this layout only: tensor-parallel size")
      ("pp", po::value(&c.pp), "explain this layout only: pipeline stages")
      ("dp", po::value(&c.dp), "explain this layout only: data-parallel replicas")
      ("pp-layers", po::value(&c.pp_layers), "with --pp: layers per stage, e.g. 27,27,26")
      ("max-loras", po::value(&c.max_loras)->default_value(0),
       "LoRA adapters the server holds (0: none), counted in the weights")
      ("max-lora-rank", po::value(&c.max_lora_rank)->default_value(c.max_lora_rank),
       "the adapters' largest rank r")
      ("dtype", activation_dtype_value(&c.dtype),
       "as serve's --dtype (auto): with float32, LoRA adapters are counted in float32")
      ("json", po::bool_switch(&c.json), "print JSON for scripts")
      ("svg", po::value(&c.svg), "also draw each layout's memory per rank into this SVG file")
      ("speculative-config", po::value(&c.speculative), kSpeculativeConfigHelp);
  // clang-format on
  add_config_override_options(desc, c.overrides);
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi plan --model DIR|--model-config FILE --gpus N --gpu-mem SIZE "
                     "[--nodes K] [--dp D --tp T --pp P] [--json] [--svg FILE]"))
    return 0;
  if (c.model.empty() == c.model_config.empty())
    raise(Err::Usage, "give exactly one of --model DIR and --model-config FILE");
  PlanInputs in = to_inputs(c);
  const std::string source = c.model.empty() ? c.model_config : c.model;
  in.model_source = source;

  const ModelConfig cfg = ModelConfig::load(source, c.overrides);
  if (!c.model.empty()) {
    in.tensor_dtypes = read_checkpoint_dtypes(c.model);
    in.tensor_blocks = read_checkpoint_blocks(c.model);
  }

  if (one_layout(c)) return explain_layout(c, cfg, in);

  const PlanResult plan = plan_layouts(cfg, in);
  print(c.json ? plan_json(cfg, plan).dump(2) + "\n" : render_plan_text(cfg, plan));
  if (!c.svg.empty()) write_svg(c.svg, render_plan_svg(cfg, plan));
  if (plan.best >= 0) return 0;
  std::string fix;
  for (const auto& s : plan.suggestions) fix += (fix.empty() ? "" : " Or: ") + s.sentence;
  raise(plan.failure, plan.recommendation, fix);
}

}  // namespace qmpi
