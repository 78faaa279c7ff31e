#include "app/commands/vllm_flags.h"

#include <cctype>
#include <cstdint>

#include "core/edit_distance.h"

namespace qmpi {

namespace po = boost::program_options;

namespace {

using U = VllmFlagUse;
using A = VllmFlagArgs;

// docs/vllm-compat.md lists this table row by row.
const std::vector<VllmFlag> kFlags = {
    // layout and scheduling: qmpi's options under vLLM's names
    {"--tensor-parallel-size", U::Rename, A::One, "--tp"},
    {"-tp", U::Rename, A::One, "--tp"},
    {"--pipeline-parallel-size", U::Rename, A::One, "--pp"},
    {"-pp", U::Rename, A::One, "--pp"},
    {"--data-parallel-size", U::Rename, A::One, "--dp"},
    {"-dp", U::Rename, A::One, "--dp"},
    {"--max-num-batched-tokens", U::Rename, A::One, "--max-batched-tokens"},
    {"--gpu-util", U::Rename, A::One, "--gpu-memory-utilization"},  // `qmpi plan`'s former name
    {"--kv-cache-dtype", U::Rename, A::One, "--kv-dtype"},
    {"--num-gpu-blocks-override", U::Rename, A::One, "--kv-blocks"},
    {"--no-enable-prefix-caching", U::Rename, A::None, "--no-prefix-caching"},
    // `vllm run-batch`'s file names
    {"-i", U::Rename, A::One, "--input"},
    {"--input-file", U::Rename, A::One, "--input"},
    {"-o", U::Rename, A::One, "--output"},
    {"--output-file", U::Rename, A::One, "--output"},
    // what qmpi does anyway
    {"--enable-prefix-caching", U::Default, A::None,
     "prefix caching is on unless --no-prefix-caching"},
    {"--enable-chunked-prefill", U::Default, A::None,
     "long prompts are always prefilled in chunks"},
    {"--enable-auto-tool-choice", U::Default, A::None,
     "requests with tools get Qwen's <tool_call> blocks back as tool_calls"},
    {"--disable-log-requests", U::Default, A::None,
     "no per-request lines unless --enable-log-requests"},
    {"--no-enable-log-requests", U::Default, A::None,
     "no per-request lines unless --enable-log-requests"},
    {"--generation-config", U::Default, A::One,
     "generation_config.json beside the weights gives the sampling defaults (vLLM's auto)"},
    // qmpi does something else
    {"--quantization", U::Noted, A::One, "the quantization is read from config.json"},
    {"-q", U::Noted, A::One, "the quantization is read from config.json"},
    {"--tokenizer", U::Noted, A::One, "the tokenizer is read from the --model folder"},
    {"--tokenizer-mode", U::Noted, A::One, "the tokenizer is read from the --model folder"},
    {"--revision", U::Noted, A::One,
     "--model is a local folder, .h5 or .gguf file; nothing is downloaded"},
    {"--tokenizer-revision", U::Noted, A::One, "--model is a local folder; nothing is downloaded"},
    {"--code-revision", U::Noted, A::One, "--model is a local folder; nothing is downloaded"},
    {"--download-dir", U::Noted, A::One, "--model is a local folder; nothing is downloaded"},
    {"--trust-remote-code", U::Noted, A::None,
     "no Python code from the checkpoint runs: qmpi implements the Qwen architectures itself"},
    {"--load-format", U::Noted, A::One,
     "safetensors folders, .h5 and .gguf files are told apart by name"},
    {"--seed", U::Noted, A::One,
     "sampling is seeded per request (its \"seed\", else at random); --seed-weights seeds "
     "--synthetic-weights"},
    {"--swap-space", U::Noted, A::One,
     "no KV swap to host memory: a preempted sequence is recomputed"},
    {"--cpu-offload-gb", U::Noted, A::One, "no weight offload: spread the model with --tp/--pp"},
    {"--no-enable-chunked-prefill", U::Noted, A::None,
     "long prompts are always prefilled in chunks of --max-batched-tokens"},
    {"--tool-call-parser", U::Noted, A::One,
     "requests with tools get Qwen's <tool_call> blocks back as tool_calls (vLLM's hermes)"},
    {"--tool-parser-plugin", U::Noted, A::One, "tool calls are parsed as Qwen writes them"},
    {"--uvicorn-log-level", U::Noted, A::One, "the HTTP front logs at --log-level"},
    {"--disable-uvicorn-access-log", U::Noted, A::None, "the HTTP front logs no access lines"},
    {"--response-role", U::Noted, A::One, "chat answers have role \"assistant\""},
    {"--distributed-executor-backend", U::Noted, A::One,
     "ranks are MPI processes: start them with mpirun or srun"},
    {"--worker-use-ray", U::Noted, A::None,
     "ranks are MPI processes: start them with mpirun or srun"},
    {"--disable-custom-all-reduce", U::Noted, A::None,
     "TP all-reduces are NCCL's (--comm nccl) or MPI's (--comm mpi)"},
    {"--max-seq-len-to-capture", U::Noted, A::One,
     "--cuda-graphs records decode steps of every length"},
    {"-O", U::Noted, A::One, "no compilation levels: kernels are built ahead of time"},
    {"--compilation-config", U::Noted, A::One,
     "no compilation levels: kernels are built ahead of time"},
    {"--max-logprobs", U::Noted, A::One, "top_logprobs is limited as OpenAI limits it (20)"},
    {"--scheduling-policy", U::Noted, A::One, "requests are scheduled first come, first served"},
    {"--enable-expert-parallel", U::Default, A::None, "each --tp rank holds whole MoE experts"},
    {"--allowed-origins", U::Noted, A::One, "the HTTP front sends no CORS headers"},
    {"--disable-fastapi-docs", U::Noted, A::None, "the HTTP front serves no /docs pages"},
    {"--enable-force-include-usage", U::Noted, A::None,
     "streams send usage when stream_options asks"},
    {"--enable-server-load-tracking", U::Noted, A::None,
     "/metrics shows the requests running and waiting"},
    // options of `vllm serve` that `qmpi batch` has no use for, and of `vllm run-batch`
    {"--disable-log-stats", U::Noted, A::None, "batch reports progress by --progress"},
    {"--enable-log-requests", U::Noted, A::None, "batch writes each request's result line"},
    {"--max-log-len", U::Noted, A::One, "batch logs no prompts"},
    {"--output-tmp-dir", U::Noted, A::One,
     "--output is written in place, fsynced every --fsync-interval; --resume carries on"},
    {"--enable-metrics", U::Noted, A::None, "batch reports progress on stderr, not by Prometheus"},
    {"--url", U::Noted, A::One, "batch reports progress on stderr, not by Prometheus"},
    {"--port", U::Noted, A::One, "batch reports progress on stderr, not by Prometheus"},
};

const VllmFlag* find_flag(std::string_view name) {
  for (const VllmFlag& f : kFlags)
    if (f.name == name) return &f;
  return nullptr;
}

// Boost's lookup: "-x" for a short name, the bare name for a long one, as written or (`prefix`)
// as the start of one. Ambiguous prefixes count as known, so Boost reports them in its own words.
const po::option_description* find_option(const po::options_description& desc,
                                          std::string_view name, bool prefix = false) {
  try {
    if (name.starts_with("--")) return desc.find_nothrow(std::string(name.substr(2)), prefix);
    if (name.size() == 2) return desc.find_nothrow(std::string(name), false);
    return nullptr;  // vLLM's single-dash names (-tp): Boost has none
  } catch (const po::ambiguous_option&) {
    static const po::option_description ambiguous;
    return &ambiguous;
  }
}

bool is_flag(const std::string& a) {
  if (a.size() < 2 || a[0] != '-') return false;
  return !(std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.');  // -1, -.5: values
}

// The command's option, or a vLLM name it takes, that reads most like `name`.
std::string closest(std::string_view name, const po::options_description& desc) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const auto consider = [&](const std::string& candidate) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_d) best_d = d, best = candidate;
  };
  for (const auto& o : desc.options())
    if (!o->long_name().empty()) consider("--" + o->long_name());
  for (const VllmFlag& f : kFlags)
    if (f.use != U::Rename || find_option(desc, f.qmpi)) consider(std::string(f.name));
  return best;
}

}  // namespace

const std::vector<VllmFlag>& vllm_flags() {
  return kFlags;
}

VllmRewrite with_vllm_aliases(const Args& args, const po::options_description& desc) {
  VllmRewrite out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!is_flag(a)) {
      out.args.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const std::string inline_value = eq == std::string::npos ? "" : a.substr(eq);
    // The command's own option, then vLLM's flag (--seed is not --seed-weights), then what
    // Boost takes as the start of an option's name (--max-model for --max-model-len).
    const VllmFlag* f = find_flag(name);
    const po::option_description* own = find_option(desc, name);
    if (!own && !f) own = find_option(desc, name, true);
    if (own) {
      out.args.push_back(a);
      // Its value is not a flag even when it starts with '-' (--stop -1 is rare; --stop - too).
      if (eq == std::string::npos && own->semantic() && own->semantic()->max_tokens() > 0 &&
          i + 1 < args.size())
        out.args.push_back(args[++i]);
      continue;
    }
    if (f && f->use == U::Rename && find_option(desc, f->qmpi)) {
      out.args.push_back(std::string(f->qmpi) + inline_value);
      continue;
    }
    if (!f || f->use == U::Rename) {
      out.unknown.push_back(name + " (closest: " + closest(name, desc) + ")");
      continue;
    }
    std::string given = name + (inline_value.empty() ? "" : " " + inline_value.substr(1));
    if (inline_value.empty() && f->args != A::None) {
      while (i + 1 < args.size() && !is_flag(args[i + 1])) {
        given += " " + args[++i];
        if (f->args == A::One) break;
      }
    }
    if (f->use == U::Noted) out.notes.push_back(given + ": " + std::string(f->qmpi));
  }
  return out;
}

}  // namespace qmpi
