// qmpi make-model: a random-weight Qwen model (Qwen2, Qwen3, Qwen2-MoE or Qwen3-MoE) in the exact
// Hugging Face layout, for tests, benchmarks and planning. Its output text is meaningless by
// construction.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>

#include "app/commands/commands.h"
#include "core/errors.h"
#include "model/presets.h"
#include "model/synthetic_checkpoint.h"
#include "model/synthetic_fp8_checkpoint.h"
#include "model/synthetic_int4_checkpoint.h"

namespace qmpi {
namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

const char* const kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json"};

// --tokenizer-dir, else $QMPI_TOKENIZER_DIR, else the cache scripts/setup.sh fills.
fs::path tokenizer_dir(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("QMPI_TOKENIZER_DIR"); env && *env) return env;
  return fs::path(QMPI_SOURCE_DIR) / ".cache" / "qwen-tokenizer";
}

void check_tokenizer(const fs::path& dir) {
  for (const char* f : kTokenizerFiles)
    if (!fs::is_regular_file(dir / f))
      raise(Err::TokenizerMissing, "no " + std::string(f) + " in " + dir.string(),
            "Run scripts/setup.sh (it fetches the Qwen tokenizer into .cache/qwen-tokenizer), or "
            "pass --tokenizer-dir DIR / set QMPI_TOKENIZER_DIR.");
}

DType parse_weight_dtype(const std::string& s) {
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  if (s == "f32") return DType::F32;
  raise(Err::Usage, "--dtype " + s + " is not one of bf16, f16, f32");
}

// "494.03M" parameters, "1.54B"; bytes as "988.06 MB", "1.98 GB".
std::string human_params(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, n >= 1e9 ? "%.2fB" : "%.2fM", n >= 1e9 ? n / 1e9 : n / 1e6);
  return buf;
}

std::string human_bytes(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, n >= 1e9 ? "%.2f GB" : "%.2f MB", n >= 1e9 ? n / 1e9 : n / 1e6);
  return buf;
}

struct MakeModelCli {
  std::string out, preset, like, dtype, tokenizer_dir, quant, float_out;
  int64_t group_size = 128;
  uint64_t seed = 0;
  int shards = 1;
};

po::options_description make_model_options(MakeModelCli& c) {
  po::options_description opts("qmpi make-model options");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("out", po::value(&c.out), "output folder (created; existing files are overwritten)")
      ("preset", po::value(&c.preset)->default_value("tiny"),
       "model shape: tiny | qwen2.5-0.5b (Qwen2) | tiny-qwen3 | qwen3-0.6b | qwen3-1.7b (Qwen3) | "
       "tiny-qwen2-moe (Qwen2-MoE) | tiny-qwen3-moe | qwen3-30b-a3b | qwen3-moe-bench (Qwen3-MoE)")
      ("like", po::value(&c.like),
       "copy the shape of a real model's config.json (overrides --preset)")
      ("seed", po::value(&c.seed)->default_value(0), "random seed of the weights")
      ("dtype", po::value(&c.dtype)->default_value("bf16"), "weight dtype: bf16 | f16 | f32")
      ("shards", po::value(&c.shards)->default_value(1),
       "number of safetensors files (K > 1 adds model.safetensors.index.json)")
      ("tied", "tie lm_head to the embedding (omit lm_head.weight)")
      ("untied", "write a separate lm_head.weight")
      ("quant", po::value(&c.quant),
       "quantized checkpoint: awq (AutoAWQ GEMM) | gptq (AutoGPTQ), other tensors f16; fp8 "
       "(e4m3, 128x128 block scales, as Qwen's -FP8 releases), other tensors bf16")
      ("group-size", po::value(&c.group_size)->default_value(128),
       "int4 inputs per scale/zero group (a multiple of 8, or -1 for one group)")
      ("desc-act", "gptq: act-order (a random g_idx permutation of the input rows' groups)")
      ("sym", "gptq: symmetric (every zero point 8)")
      ("float-out", po::value(&c.float_out),
       "with --quant: also write the float model the quantized one dequantizes to into this "
       "folder")
      ("tokenizer-dir", po::value(&c.tokenizer_dir),
       "folder with tokenizer.json + tokenizer_config.json (default: $QMPI_TOKENIZER_DIR, else "
       "the cache scripts/setup.sh fills)");
  // clang-format on
  return opts;
}

// The int4 options of --quant awq|gptq, after checking that the quantization options agree.
Int4ModelOptions quant_options(const MakeModelCli& c, const po::variables_map& vm) {
  Int4ModelOptions int4;
  if (c.quant.empty()) {
    if (vm.count("desc-act") || vm.count("sym") || !c.float_out.empty() ||
        !vm["group-size"].defaulted())
      raise(Err::Usage, "make-model: --group-size, --desc-act, --sym and --float-out need --quant");
    return int4;
  }
  if (c.quant != "awq" && c.quant != "gptq" && c.quant != "fp8")
    raise(Err::Usage, "--quant " + c.quant + " is not one of awq, gptq, fp8");
  if (c.quant == "fp8" &&
      (vm.count("desc-act") || vm.count("sym") || !vm["group-size"].defaulted()))
    raise(Err::Usage,
          "make-model: --group-size, --desc-act and --sym are int4 options; fp8 "
          "uses 128x128 blocks");
  int4.method = c.quant == "awq" ? QuantMethod::Awq : QuantMethod::Gptq;
  int4.group_size = c.group_size;
  int4.desc_act = vm.count("desc-act") > 0;
  int4.sym = vm.count("sym") > 0;
  if (!vm["dtype"].defaulted())
    raise(Err::Usage,
          "make-model: --quant writes its own float dtype beside the quantized tensors; drop "
          "--dtype");
  return int4;
}

// The tokenizer files into the model's folder (and --float-out's).
void copy_tokenizer(const fs::path& tok, const MakeModelCli& c, CheckpointSummary& summary) {
  for (const char* f : kTokenizerFiles) {
    std::error_code ec;
    fs::copy_file(tok / f, fs::path(c.out) / f, fs::copy_options::overwrite_existing, ec);
    if (ec)
      raise(Err::OutputFile,
            "cannot copy " + (tok / f).string() + " to " + c.out + ": " + ec.message());
    summary.files.push_back(f);
    if (!c.float_out.empty())
      fs::copy_file(tok / f, fs::path(c.float_out) / f, fs::copy_options::overwrite_existing, ec);
    if (ec)
      raise(Err::OutputFile,
            "cannot copy " + (tok / f).string() + " to " + c.float_out + ": " + ec.message());
  }
}

void print_summary(const MakeModelCli& c, const CheckpointSummary& summary) {
  const std::string shape = c.like.empty() ? c.preset : "like " + c.like;
  const std::string weights = c.quant.empty() ? c.dtype
                              : c.quant == "fp8"
                                  ? "fp8 e4m3 block 128x128"
                                  : "int4 " + c.quant + " g" + std::to_string(c.group_size);
  std::printf(
      "make-model: %s params (%s, %s, seed %llu) in %s: %s of safetensors in %d file%s, "
      "%zu files in all; the weights are random\n",
      human_params(double(summary.params)).c_str(), shape.c_str(), weights.c_str(),
      static_cast<unsigned long long>(c.seed), c.out.c_str(),
      human_bytes(double(summary.file_bytes)).c_str(), c.shards, c.shards == 1 ? "" : "s",
      summary.files.size());
}

}  // namespace

int cmd_make_model(const Args& args) {
  MakeModelCli c;
  const po::options_description opts = make_model_options(c);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    raise(Err::Usage, std::string("make-model: ") + e.what(), "Run `qmpi make-model --help`.");
  }
  if (vm.count("help")) {
    std::cout << "usage: qmpi make-model --out DIR [options]\n"
                 "Writes a random-weight Qwen model (config.json, generation_config.json, "
                 "tokenizer files, safetensors).\nIts weights are random: generated text is "
                 "meaningless.\n\n"
              << opts << "\n";
    return 0;
  }
  if (c.out.empty())
    raise(Err::Usage, "make-model needs --out DIR", "Run `qmpi make-model --help`.");
  if (vm.count("tied") && vm.count("untied"))
    raise(Err::Usage, "make-model: --tied and --untied exclude each other");
  const DType dtype = parse_weight_dtype(c.dtype);
  const Int4ModelOptions int4 = quant_options(c, vm);

  const ModelConfig base = c.like.empty() ? preset_config(c.preset) : config_like(c.like);
  nlohmann::json config = base.raw;
  if (vm.count("tied")) config["tie_word_embeddings"] = true;
  if (vm.count("untied")) config["tie_word_embeddings"] = false;

  const fs::path tok = tokenizer_dir(c.tokenizer_dir);
  check_tokenizer(tok);  // before the weights, so a missing tokenizer fails fast
  CheckpointSummary summary =
      c.quant.empty() ? write_synthetic_checkpoint(c.out, config, c.seed, dtype, c.shards)
      : c.quant == "fp8"
          ? write_synthetic_fp8_checkpoint(c.out, config, c.seed, c.shards, c.float_out)
          : write_synthetic_int4_checkpoint(c.out, config, c.seed, int4, c.shards, c.float_out);
  copy_tokenizer(tok, c, summary);
  print_summary(c, summary);
  return 0;
}

}  // namespace qmpi
