#include "plan/plan_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <set>

#include "core/byte_size.h"
#include "engine/kv_sizing.h"
#include "io/gguf_file.h"
#include "plan/param_counts.h"

namespace qmpi {
namespace {

using nlohmann::json;

std::string printf_string(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string out(size_t(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, again);
  va_end(again);
  out.pop_back();
  return out;
}

const char* backend_name(BackendKind b) {
  return b == BackendKind::Cuda ? "cuda" : "cpu";
}

std::string dtype_summary(const ModelConfig& cfg, const PlanInputs& in) {
  if (in.int4_weights) return "int4-g128 estimate";
  std::set<std::string> names;
  for (const auto& t : expected_tensors(cfg)) {
    if (in.tensor_blocks.count(t.name)) continue;
    auto it = in.tensor_dtypes.find(t.name);
    names.insert(
        std::string(dtype_name(it != in.tensor_dtypes.end() ? it->second : cfg.torch_dtype)));
  }
  for (const auto& [name, type] : in.tensor_blocks) names.insert(std::string(type->name));
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : "+") + n;
  if (cfg.quant.gguf() || is_gguf_path(in.model_source))
    return "GGUF " + s + " (the file's tensors)";
  s += in.tensor_dtypes.empty() ? " (config torch_dtype)" : " (safetensors headers)";
  if (cfg.quant.fp8())  // the decoder projections are e4m3 whatever the float tensors are
    return "fp8 e4m3 block " + std::to_string(cfg.quant.block_n) + "x" +
           std::to_string(cfg.quant.block_k) + " projections, other tensors " + s;
  if (cfg.quant)  // the decoder projections are int4 whatever the float tensors are
    s = "int4 " + cfg.quant.method_name() + " group " + std::to_string(cfg.quant.group_size) +
        " projections, other tensors " + s;
  return s;
}

std::string budget_line(const PlanInputs& in) {
  const int nodes = std::max(in.nodes, 1);
  std::string where = std::to_string(in.gpus) +
                      (in.backend == BackendKind::Cuda ? " GPUs" : " ranks") + " on " +
                      std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
  if (in.backend == BackendKind::Cuda)
    return printf_string("%s GiB per GPU (%s GiB x %.2f), %s, backend cuda",
                         format_gib(rank_budget(in, in.gpus)).c_str(),
                         format_gib(in.gpu_mem).c_str(), in.gpu_util, where.c_str());
  return format_gib(in.host_mem) + " GiB of host memory per host, shared by its ranks (" +
         format_gib(rank_budget(in, in.gpus)) + " GiB each when all " + std::to_string(in.gpus) +
         " run), " + where + ", backend cpu";
}

// "LoRA      4 adapters (--max-loras) x rank 16 ...": empty without adapters.
std::string lora_line(const ModelConfig& cfg, const PlanInputs& in) {
  const uint64_t bytes = lora_weight_bytes(cfg, in);
  if (bytes == 0) return "";
  PlanInputs as_f32 = in;
  as_f32.bf16_activations = false;
  const uint64_t f32 = lora_weight_bytes(cfg, as_f32);
  const char* dtype = bytes == f32       ? "F32"
                      : 2 * bytes == f32 ? "BF16"
                                         : "BF16 on the BF16 projections, F32 on the others";
  return "LoRA      " + std::to_string(in.max_loras) + " adapters (--max-loras) x rank " +
         std::to_string(in.max_lora_rank) + " on q/k/v/o/gate/up/down: " + format_bytes(bytes) +
         " in " + dtype + " over all ranks, counted in their weights\n";
}

std::string header(const ModelConfig& cfg, const PlanInputs& in) {
  PlanInputs as_int4 = in;
  as_int4.int4_weights = true;
  const uint64_t weights = model_weight_bytes(cfg, in);
  const int64_t tokens = kv_cache_tokens(cfg, in);
  const uint64_t per_token = kv_bytes_per_token(cfg, in.kv_dtype);
  std::string s;
  s += "model     " + in.model_source + ": " + cfg.architecture + ", " +
       std::to_string(cfg.num_layers) + " layers, hidden " + std::to_string(cfg.hidden_size) +
       ", " + std::to_string(cfg.num_heads) + " heads, " + std::to_string(cfg.num_kv_heads) +
       " KV heads, head_dim " + std::to_string(cfg.head_dim) + ", intermediate " +
       std::to_string(cfg.intermediate_size) + ", vocab " + std::to_string(cfg.vocab_size) + "\n";
  if (cfg.moe.num_experts > 0) {
    const ParamCounts n = param_counts(cfg);
    s += printf_string(
        "params    %.3fB in all, %.2fB active per token (%lld experts, %lld per token, "
        "split whole over the TP ranks)\n",
        double(n.total) / 1e9, double(n.active) / 1e9, static_cast<long long>(cfg.moe.num_experts),
        static_cast<long long>(cfg.moe.experts_per_token));
  }
  s += "weights   " + format_gb(weights) + " (" + format_gib(weights) + " GiB) in " +
       dtype_summary(cfg, in);
  if (!in.int4_weights && !cfg.quant)
    s += "; an int4-g128 AWQ/GPTQ checkpoint would be about " +
         format_gb(model_weight_bytes(cfg, as_int4));
  s += "\n" + lora_line(cfg, in);
  if (in.draft_weights > 0)
    s += "draft     " + format_gb(in.draft_weights) + " of weights and " +
         format_bytes(in.draft_kv_per_token) +
         " of its K and V per cached token, on rank 0 of each replica (--speculative-config)\n";
  s += "KV cache  " + format_bytes(per_token) + " per token in " +
       std::string(dtype_name(in.kv_dtype));
  if (in.kv_dtype != DType::BF16)
    s += " (" + format_bytes(kv_bytes_per_token(cfg, DType::BF16)) + " in BF16)";
  const std::string bytes = format_gib(per_token * uint64_t(tokens)) + " GiB over all ranks";
  if (in.kv_blocks > 0)
    s += "; " + std::to_string(tokens) + " tokens (--kv-blocks " + std::to_string(in.kv_blocks) +
         ") = " + bytes + "\n";
  else
    s +=
        "; one max-model-len sequence (" + std::to_string(tokens) + " tokens) = " + bytes +
        " at least, then the memory left" +
        (in.backend != BackendKind::Cpu ? std::string()
         : in.kv_cache_memory > 0 ? " up to --kv-cache-memory " + format_bytes(in.kv_cache_memory) +
                                        " per rank, taken as blocks are used"
                                  : " up to " + std::to_string(int(kCpuKvMemoryShare * 100)) +
                                        "% of it, taken as blocks are used") +
        " (max-num-seqs limits the sequences at once, it reserves none)\n";
  s += "budget    " + budget_line(in) + "\n";
  return s;
}

std::string note_for(const LayoutVerdict& v, bool best) {
  if (!v.valid) return error_id(v.code) + " " + v.reason;
  if (best) return "<- recommended";
  if (v.fits) return "";
  return error_id(v.memory_code) + " " + std::string(error_entry(v.memory_code).name);
}

std::string row(const ModelConfig& cfg, const LayoutVerdict& v, bool best) {
  if (!v.valid)
    return printf_string("%3d %3d %3d %5d  no    %8s %8s %8s %8s %8s %8s  %-4s %13s %8s %9s  %s\n",
                         v.layout.dp, v.layout.tp, v.layout.pp, v.gpus(), "-", "-", "-", "-", "-",
                         "-", "-", "-", "-", "-", note_for(v, best).c_str());
  const RankMemory& m = v.biggest_rank();
  const std::string copies =
      std::to_string(v.kv_head_copies) + "/" + std::to_string(cfg.num_kv_heads);
  return printf_string(
      "%3d %3d %3d %5d  yes   %8s %8s %8s %8s %8s %8s  %-4s %13lld %8s %9s  %s\n", v.layout.dp,
      v.layout.tp, v.layout.pp, v.gpus(), format_gib(m.weights).c_str(),
      format_gib(m.kv_cache).c_str(), format_gib(m.activations).c_str(),
      format_gib(m.overhead).c_str(), format_gib(m.total()).c_str(), format_gib(v.budget).c_str(),
      v.fits ? "yes" : "no", static_cast<long long>(v.kv_room_tokens), copies.c_str(),
      (v.layout.tp > 1 ? format_bytes(v.tp_bytes_per_token) : std::string("-")).c_str(),
      note_for(v, best).c_str());
}

constexpr const char* kTableHead =
    " DP  TP  PP ranks  valid  weights KV cache   activ. overhead    total   budget  fits KV room "
    "tok"
    " KV heads  AR/token  note\n";

json rank_json(const RankMemory& m) {
  return {{"rank", m.rank},
          {"stage", m.stage},
          {"tp_rank", m.tp_rank},
          {"layers", {m.layers.begin, m.layers.end}},
          {"kv_heads", m.kv_heads},
          {"weights_bytes", m.weights},
          {"expert_weights_bytes", m.expert_weights},
          {"lora_weights_bytes", m.lora_weights},
          {"draft_weights_bytes", m.draft_weights},
          {"kv_cache_bytes", m.kv_cache},
          {"kv_bytes_per_token", m.kv_per_token},
          {"activations_bytes", m.activations},
          {"overhead_bytes", m.overhead},
          {"total_bytes", m.total()}};
}

json verdict_json(const LayoutVerdict& v, bool all_ranks) {
  json j = {{"dp", v.layout.dp},
            {"tp", v.layout.tp},
            {"pp", v.layout.pp},
            {"gpus", v.gpus()},
            {"valid", v.valid}};
  if (!v.valid) {
    j["code"] = error_id(v.code);
    j["error"] = std::string(error_entry(v.code).name);
    j["reason"] = v.reason;
    j["fix"] = v.fix;
    return j;
  }
  j["fits"] = v.fits;
  if (!v.fits) {
    j["code"] = error_id(v.memory_code);
    j["error"] = std::string(error_entry(v.memory_code).name);
  }
  j["budget_bytes"] = v.budget;
  j["kv_room_tokens"] = v.kv_room_tokens;
  j["rank_kv_tokens"] = v.rank_kv_tokens;
  j["full_length_seqs"] = v.full_length_seqs;
  j["kv_head_copies"] = v.kv_head_copies;
  j["tp_bytes_per_token"] = v.tp_bytes_per_token;
  j["hosts"] = v.hosts;
  j["cross_host_hops"] = v.cross_host_hops;
  j["biggest_rank"] = rank_json(v.biggest_rank());
  if (all_ranks) {
    j["ranks"] = json::array();
    for (const auto& m : v.ranks) j["ranks"].push_back(rank_json(m));
  }
  return j;
}

json model_json(const ModelConfig& cfg, const PlanInputs& in) {
  PlanInputs as_int4 = in;
  as_int4.int4_weights = true;
  const ParamCounts n = param_counts(cfg);
  return {{"architecture", cfg.architecture},
          {"params", n.total},
          {"active_params", n.active},
          {"experts", cfg.moe.num_experts},
          {"experts_per_token", cfg.moe.experts_per_token},
          {"layers", cfg.num_layers},
          {"hidden_size", cfg.hidden_size},
          {"heads", cfg.num_heads},
          {"kv_heads", cfg.num_kv_heads},
          {"head_dim", cfg.head_dim},
          {"intermediate_size", cfg.intermediate_size},
          {"vocab_size", cfg.vocab_size},
          {"weights_bytes", model_weight_bytes(cfg, in)},
          {"int4_weights_bytes", model_weight_bytes(cfg, as_int4)},
          {"lora_weights_bytes", lora_weight_bytes(cfg, in)},
          {"kv_bytes_per_token", kv_bytes_per_token(cfg, in.kv_dtype)},
          {"kv_dtype", std::string(dtype_name(in.kv_dtype))},
          {"kv_cache_tokens", kv_cache_tokens(cfg, in)},
          {"max_model_len", resolved_max_model_len(cfg, in)},
          {"max_num_seqs", in.max_num_seqs}};
}

json inputs_json(const PlanInputs& in) {
  return {{"gpus", in.gpus},
          {"nodes", in.nodes},
          {"backend", backend_name(in.backend)},
          {"gpu_mem_bytes", in.gpu_mem},
          {"gpu_util", in.gpu_util},
          {"host_mem_bytes", in.host_mem},
          {"int4_weights", in.int4_weights},
          {"max_loras", in.max_loras},
          {"max_lora_rank", in.max_lora_rank}};
}

}  // namespace

std::string render_plan_text(const ModelConfig& cfg, const PlanResult& plan) {
  std::string s = header(cfg, plan.inputs) + "\n";
  s += "Per-rank memory in GiB for the most loaded rank of each layout:\n";
  s += kTableHead;
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    std::string line = row(cfg, plan.layouts[i], int(i) == plan.best);
    // A row without a note would end in the note column's padding.
    while (line.size() > 1 && line[line.size() - 2] == ' ') line.erase(line.size() - 2, 1);
    s += line;
  }
  s += "KV heads: copies held by one stage's TP ranks / the model's (more when a KV head's query "
       "heads\nstraddle two ranks). AR/token: all-reduce bytes a TP rank sends per token. DP: "
       "replicas, each\nholding the whole model; their KV room is added up, per-rank columns are "
       "one replica's.\n\n";
  if (plan.best >= 0) {
    s += plan.recommendation + "\n  " + plan.command + "\n";
    if (!plan.why.empty()) s += "Why not the others:\n";
    for (const auto& w : plan.why) s += "  - " + w + "\n";
    return s;
  }
  s += plan.recommendation + "\n";
  if (!plan.suggestions.empty()) s += "What would fit:\n";
  for (const auto& sug : plan.suggestions) {
    s += "  - " + sug.sentence + "\n";
    if (!sug.command.empty()) s += "      " + sug.command + "\n";
  }
  return s;
}

std::string render_layout_text(const ModelConfig& cfg, const LayoutVerdict& v,
                               const PlanInputs& in) {
  std::string s = header(cfg, in) + "\n";
  s += "layout    " + layout_flags(v.layout) + " on " + std::to_string(v.gpus()) +
       (v.gpus() == 1 ? " rank" : " ranks") + ": ";
  if (!v.valid) {
    s += "invalid (" + error_id(v.code) + " " + std::string(error_entry(v.code).name) + ")\n";
    s += "  " + v.reason + "\n  fix: " + v.fix + "\n";
    return s;
  }
  s += std::string(v.fits ? "valid, fits" : "valid, does not fit") + "; " +
       std::to_string(v.hosts) + (v.hosts == 1 ? " host" : " hosts") + ", " +
       std::to_string(v.cross_host_hops) + " cross-host pipeline hops; " +
       std::to_string(v.kv_head_copies) + " KV-head copies per stage (the model has " +
       std::to_string(cfg.num_kv_heads) + ")";
  if (v.layout.tp > 1)
    s += ", " + format_bytes(v.tp_bytes_per_token) + " of all-reduce per token per rank";
  s += "\n\n";
  s += "Memory per rank in GiB:\n";
  s += "rank  host stage  tp  layers    weights KV cache   activ. overhead    total   budget  "
       "fits  KV heads\n";
  const int per_host = (std::max(in.gpus, 1) + std::max(in.nodes, 1) - 1) / std::max(in.nodes, 1);
  for (const auto& m : v.ranks) {
    const std::string layers =
        std::to_string(m.layers.begin) + "-" + std::to_string(m.layers.end - 1);
    s += printf_string("%4d %5d %5d %3d  %-8s %8s %8s %8s %8s %8s %8s  %-4s  %8lld\n", m.rank,
                       m.rank / per_host, m.stage, m.tp_rank, layers.c_str(),
                       format_gib(m.weights).c_str(), format_gib(m.kv_cache).c_str(),
                       format_gib(m.activations).c_str(), format_gib(m.overhead).c_str(),
                       format_gib(m.total()).c_str(), format_gib(v.budget).c_str(),
                       m.total() <= v.budget ? "yes" : "no", static_cast<long long>(m.kv_heads));
  }
  if (cfg.moe.num_experts > 0) {
    const Range most = split_range(cfg.moe.num_experts, v.layout.tp, 0, 1);
    s += "Routed experts: " + std::to_string(most.size()) + " of " +
         std::to_string(cfg.moe.num_experts) + " per layer on the busiest TP rank, " +
         format_gib(v.biggest_rank().expert_weights) +
         " GiB of expert weights on the most loaded rank.\n";
  }
  s += "\n";
  if (v.fits)
    s += "KV room: " + std::to_string(v.kv_room_tokens) + " tokens on the tightest rank" +
         (v.layout.dp > 1 ? " (its " + std::to_string(v.layout.dp) + " replicas together)" : "") +
         "; " + std::to_string(v.full_length_seqs) + " sequences of " +
         std::to_string(resolved_max_model_len(cfg, in)) + " tokens at once.\n  " +
         launch_command(v.layout, in) + "\n";
  else
    s += "Does not fit: " + memory_sentence(v, in) + ".\n";
  return s;
}

json plan_json(const ModelConfig& cfg, const PlanResult& plan) {
  json j = {{"model", model_json(cfg, plan.inputs)}, {"inputs", inputs_json(plan.inputs)}};
  j["layouts"] = json::array();
  for (const auto& v : plan.layouts) j["layouts"].push_back(verdict_json(v, false));
  j["fits"] = plan.best >= 0;
  j["sentence"] = plan.recommendation;
  if (plan.best >= 0) {
    const Layout& l = plan.layouts[size_t(plan.best)].layout;
    j["recommended"] = {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"command", plan.command}};
    j["recommended"]["why"] = plan.why;
  } else {
    j["recommended"] = nullptr;
    j["code"] = error_id(plan.failure);
    j["error"] = std::string(error_entry(plan.failure).name);
  }
  j["suggestions"] = json::array();
  for (const auto& s : plan.suggestions)
    j["suggestions"].push_back({{"sentence", s.sentence}, {"command", s.command}});
  return j;
}

json layout_json(const ModelConfig& cfg, const LayoutVerdict& v, const PlanInputs& in) {
  json j = {{"model", model_json(cfg, in)},
            {"inputs", inputs_json(in)},
            {"layout", verdict_json(v, true)}};
  if (v.valid && v.fits) j["command"] = launch_command(v.layout, in);
  if (v.valid && !v.fits) j["sentence"] = memory_sentence(v, in);
  return j;
}

}  // namespace qmpi
