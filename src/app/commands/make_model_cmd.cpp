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

}  // namespace

int cmd_make_model(const Args& args) {
  std::string out, preset, like, dtype_s, tok_dir, quant, float_out;
  int64_t group_size = 128;
  uint64_t seed = 0;
  int shards = 1;
  po::options_description opts("qmpi make-model options");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("out", po::value(&out), "output folder (created; existing files are overwritten)")
      ("preset", po::value(&preset)->default_value("tiny"),
       "model shape: tiny | qwen2.5-0.5b (Qwen2) | tiny-qwen3 | qwen3-0.6b (Qwen3) | "
       "tiny-qwen2-moe (Qwen2-MoE) | tiny-qwen3-moe | qwen3-30b-a3b | qwen3-moe-bench (Qwen3-MoE)")
      ("like", po::value(&like),
       "copy the shape of a real model's config.json (overrides --preset)")
      ("seed", po::value(&seed)->default_value(0), "random seed of the weights")
      ("dtype", po::value(&dtype_s)->default_value("bf16"), "weight dtype: bf16 | f16 | f32")
      ("shards", po::value(&shards)->default_value(1),
       "number of safetensors files (K > 1 adds model.safetensors.index.json)")
      ("tied", "tie lm_head to the embedding (omit lm_head.weight)")
      ("untied", "write a separate lm_head.weight")
      ("quant", po::value(&quant),
       "quantized checkpoint: awq (AutoAWQ GEMM) | gptq (AutoGPTQ), other tensors f16; fp8 "
       "(e4m3, 128x128 block scales, as Qwen's -FP8 releases), other tensors bf16")
      ("group-size", po::value(&group_size)->default_value(128),
       "int4 inputs per scale/zero group (a multiple of 8, or -1 for one group)")
      ("desc-act", "gptq: act-order (a random g_idx permutation of the input rows' groups)")
      ("sym", "gptq: symmetric (every zero point 8)")
      ("float-out", po::value(&float_out),
       "with --quant: also write the float model the quantized one dequantizes to into this "
       "folder")
      ("tokenizer-dir", po::value(&tok_dir),
       "folder with tokenizer.json + tokenizer_config.json (default: $QMPI_TOKENIZER_DIR, else "
       "the cache scripts/setup.sh fills)");
  // clang-format on
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
  if (out.empty()) raise(Err::Usage, "make-model needs --out DIR", "Run `qmpi make-model --help`.");
  if (vm.count("tied") && vm.count("untied"))
    raise(Err::Usage, "make-model: --tied and --untied exclude each other");
  const DType dtype = parse_weight_dtype(dtype_s);
  Int4ModelOptions int4;
  if (!quant.empty()) {
    if (quant != "awq" && quant != "gptq" && quant != "fp8")
      raise(Err::Usage, "--quant " + quant + " is not one of awq, gptq, fp8");
    if (quant == "fp8" &&
        (vm.count("desc-act") || vm.count("sym") || !vm["group-size"].defaulted()))
      raise(Err::Usage,
            "make-model: --group-size, --desc-act and --sym are int4 options; fp8 "
            "uses 128x128 blocks");
    int4.method = quant == "awq" ? QuantMethod::Awq : QuantMethod::Gptq;
    int4.group_size = group_size;
    int4.desc_act = vm.count("desc-act") > 0;
    int4.sym = vm.count("sym") > 0;
    if (!vm["dtype"].defaulted())
      raise(Err::Usage,
            "make-model: --quant writes its own float dtype beside the quantized tensors; drop "
            "--dtype");
  } else if (vm.count("desc-act") || vm.count("sym") || !float_out.empty() ||
             !vm["group-size"].defaulted()) {
    raise(Err::Usage, "make-model: --group-size, --desc-act, --sym and --float-out need --quant");
  }

  const ModelConfig base = like.empty() ? preset_config(preset) : config_like(like);
  nlohmann::json config = base.raw;
  if (vm.count("tied")) config["tie_word_embeddings"] = true;
  if (vm.count("untied")) config["tie_word_embeddings"] = false;

  const fs::path tok = tokenizer_dir(tok_dir);
  check_tokenizer(tok);  // before the weights, so a missing tokenizer fails fast
  CheckpointSummary summary =
      quant.empty() ? write_synthetic_checkpoint(out, config, seed, dtype, shards)
      : quant == "fp8"
          ? write_synthetic_fp8_checkpoint(out, config, seed, shards, float_out)
          : write_synthetic_int4_checkpoint(out, config, seed, int4, shards, float_out);
  for (const char* f : kTokenizerFiles) {
    std::error_code ec;
    fs::copy_file(tok / f, fs::path(out) / f, fs::copy_options::overwrite_existing, ec);
    if (ec)
      raise(Err::OutputFile,
            "cannot copy " + (tok / f).string() + " to " + out + ": " + ec.message());
    summary.files.push_back(f);
    if (!float_out.empty())
      fs::copy_file(tok / f, fs::path(float_out) / f, fs::copy_options::overwrite_existing, ec);
    if (ec)
      raise(Err::OutputFile,
            "cannot copy " + (tok / f).string() + " to " + float_out + ": " + ec.message());
  }
  std::printf(
      "make-model: %s params (%s, %s, seed %llu) in %s: %s of safetensors in %d file%s, "
      "%zu files in all; the weights are random\n",
      human_params(double(summary.params)).c_str(),
      like.empty() ? preset.c_str() : ("like " + like).c_str(),
      quant.empty()    ? dtype_s.c_str()
      : quant == "fp8" ? "fp8 e4m3 block 128x128"
                       : ("int4 " + quant + " g" + std::to_string(group_size)).c_str(),
      static_cast<unsigned long long>(seed), out.c_str(),
      human_bytes(double(summary.file_bytes)).c_str(), shards, shards == 1 ? "" : "s",
      summary.files.size());
  return 0;
}

}  // namespace qmpi
