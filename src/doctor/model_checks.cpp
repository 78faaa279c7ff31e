#include "doctor/model_checks.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "io/h5_checkpoint.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/gguf_names.h"
#include "model/int4_tensors.h"
#include "requests/model_tokenizer.h"
#include "text/tokenizer.h"

namespace qmpi::doctor {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSection = "model";

// Keeps the first kMaxFindingsPerCode problems of each code and counts the rest, so a config
// from another model reports "... and 160 more" instead of 168 lines.
class Problems {
 public:
  explicit Problems(std::vector<Finding>& out) : out_(out) {}
  void add(Finding f) {
    auto& n = counts_[*f.code];
    if (++n <= kMaxFindingsPerCode)
      out_.push_back(std::move(f));
    else
      last_[*f.code] = f.status;
  }
  bool any() const { return !counts_.empty(); }
  bool any(Err code) const { return counts_.count(code) != 0; }
  ~Problems() {
    for (auto& [code, n] : counts_)
      if (n > kMaxFindingsPerCode) {
        const std::string more = "... and " + std::to_string(n - kMaxFindingsPerCode) + " more " +
                                 std::string(error_entry(code).name) +
                                 " problems like the ones above";
        out_.push_back(last_[code] == Status::Fail ? fail(kSection, code, more)
                                                   : warn(kSection, code, more));
      }
  }

 private:
  std::vector<Finding>& out_;
  std::map<Err, size_t> counts_;
  std::map<Err, Status> last_;
};

std::string describe(const ModelConfig& c) {
  return "config.json: " + c.architecture + ", " + std::to_string(c.num_layers) +
         " layers, hidden " + std::to_string(c.hidden_size) + ", " + std::to_string(c.num_heads) +
         " heads / " + std::to_string(c.num_kv_heads) + " KV heads, intermediate " +
         std::to_string(c.intermediate_size) + ", vocab " + std::to_string(c.vocab_size) + ", " +
         std::string(dtype_name(c.torch_dtype)) +
         (c.tie_word_embeddings ? ", tied embeddings" : "");
}

// tensor -> shard file, from the index. Empty (with a FAIL) when the index cannot be used.
std::map<std::string, std::string> read_weight_map(const fs::path& index,
                                                   std::vector<Finding>& out) {
  std::map<std::string, std::string> map;
  std::ifstream in(index);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object() || j["weight_map"].empty()) {
    out.push_back(fail(kSection, Err::IndexInvalid,
                       index.string() + " is not valid JSON with a non-empty \"weight_map\""));
    return {};
  }
  for (auto& [tensor, file] : j["weight_map"].items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      out.push_back(fail(kSection, Err::IndexInvalid,
                         index.string() + ": weight_map entry '" + tensor + "' names " +
                             file.dump() + ", which is not a file in the model folder"));
      return {};
    }
    map[tensor] = name;
  }
  return map;
}

// Old exports save RoPE's inverse frequencies, which qmpi (like transformers) recomputes.
bool is_rotary_buffer(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq");
}

// What the checkpoint holds, whatever its format.
struct Inventory {
  std::map<std::string, std::string> weight_map;  // tensor -> file that should hold it
  // Tensors whose file opened; the others' files failed and were reported, so their tensors are
  // not reported again as missing.
  std::map<std::string, TensorInfo> found;
  std::vector<std::string> unlisted;  // in a shard but not in the index
  bool indexed = false;
};

// A safetensors folder: every shard present, its header parsing, its size as the header implies.
Inventory safetensors_inventory(const std::string& model_dir, std::vector<Finding>& out) {
  Inventory inv;
  const fs::path root(model_dir);
  const fs::path index = root / kSafetensorsIndexName;
  const fs::path single = root / kSingleSafetensorsName;
  inv.indexed = fs::exists(index);
  if (inv.indexed) {
    inv.weight_map = read_weight_map(index, out);
  } else if (!fs::exists(single)) {
    out.push_back(
        fail(kSection, Err::ModelDirMissing,
             model_dir + " has neither " + kSingleSafetensorsName + " nor " + kSafetensorsIndexName,
             "Download the model's *.safetensors files (and the index when there are "
             "several) into " +
                 model_dir + "."));
  }
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [tensor, file] : inv.weight_map) by_file[file].push_back(tensor);
  if (!inv.indexed && fs::exists(single)) by_file[kSingleSafetensorsName];

  uint64_t shard_bytes = 0;
  size_t shards_ok = 0;
  {
    Problems problems(out);
    for (const auto& [file, tensors] : by_file) {
      const fs::path path = root / file;
      if (!fs::exists(path)) {
        problems.add(fail(kSection, Err::ShardMissing,
                          "shard " + file + " is missing from " + model_dir + " (the index maps " +
                              std::to_string(tensors.size()) + " tensors to it, e.g. '" +
                              tensors.front() + "')",
                          "Download " + file + " into " + model_dir + "."));
        continue;
      }
      try {
        SafetensorsFile sf(path.string(), Err::ShardMissing);
        shard_bytes += sf.file_size();
        ++shards_ok;
        std::set<std::string> listed(tensors.begin(), tensors.end());
        for (const TensorInfo& t : sf.tensors()) {
          if (inv.indexed && !listed.count(t.name)) {
            inv.unlisted.push_back(t.name + " (in " + file + ")");
            continue;
          }
          inv.found[t.name] = t;
          if (!inv.indexed) inv.weight_map[t.name] = file;
        }
        for (const std::string& name : tensors)
          if (!sf.find(name)) {
            problems.add(fail(kSection, Err::TensorMissing,
                              "tensor '" + name + "' is mapped to " + file +
                                  " by the index but that shard does not hold it"));
          }
      } catch (const Error& e) {
        problems.add(fail(kSection, e));
      }
    }
  }
  if (!by_file.empty() && shards_ok == by_file.size())
    out.push_back(ok(kSection, "weights: " + std::to_string(shards_ok) + " shard(s), " +
                                   format_bytes(shard_bytes) + ", " +
                                   std::to_string(inv.found.size()) +
                                   " tensors: every header parses and every file has the size "
                                   "its header implies"));
  return inv;
}

// A qmpi .h5 checkpoint: the file opens as one (format version, datasets, dtypes).
Inventory h5_inventory(const std::string& path, std::vector<Finding>& out) {
  Inventory inv;
  try {
    H5Weights w(path);
    for (const std::string& name : w.names()) {
      inv.found[name] = w.info(name);
      inv.weight_map[name] = fs::path(path).filename().string();
    }
    out.push_back(ok(kSection, "weights: qmpi .h5 checkpoint, " +
                                   format_bytes(fs::file_size(path)) + ", " +
                                   std::to_string(inv.found.size()) + " tensors"));
  } catch (const Error& e) {
    out.push_back(fail(kSection, e));
  }
  return inv;
}

// A GGUF model (one file or split parts): every part opens, and its tensors' bytes are where
// their types and shapes say.
Inventory gguf_inventory(const std::string& path, std::vector<Finding>& out) {
  Inventory inv;
  try {
    GgufNamedWeights w(path);
    uint64_t bytes = 0;
    for (const GgufFile& part : w.file().parts()) bytes += part.file_size();
    for (const std::string& name : w.names()) {
      inv.found[name] = w.info(name);
      inv.weight_map[name] = fs::path(w.info(name).file).filename().string();
    }
    out.push_back(ok(kSection, "weights: GGUF version " +
                                   std::to_string(w.file().meta().version()) + ", " +
                                   std::to_string(w.file().parts().size()) + " file(s), " +
                                   format_bytes(bytes) + ", " + std::to_string(inv.found.size()) +
                                   " tensors: every tensor's bytes are where its type and shape "
                                   "say"));
  } catch (const Error& e) {
    out.push_back(fail(kSection, e));
  }
  return inv;
}

// tokenizer.json beside config.json, or in the .h5 file's /meta.
Tokenizer load_tokenizer(const std::string& model_path, bool h5) {
  if (!h5) return Tokenizer::load(model_path);
  const auto json = read_h5_meta(model_path, "tokenizer.json");
  if (!json)
    raise(Err::TokenizerMissing, model_path + " holds no /meta/tokenizer.json",
          "Convert the model again with its tokenizer.json beside config.json.");
  return Tokenizer::from_json(*json, read_h5_meta(model_path, "tokenizer_config.json").value_or(""),
                              model_path + ":/meta/tokenizer.json");
}

// Every tensor config.json implies against the checkpoint's: present, shaped and typed as the
// model reads it; tensors the model does not use are named.
void tensor_findings(const ModelConfig& config, const Inventory& inv, std::vector<Finding>& out) {
  const auto& weight_map = inv.weight_map;
  const auto& found = inv.found;
  const bool indexed = inv.indexed;
  Problems problems(out);
  std::set<std::string> expected;
  std::map<std::string, size_t> dtypes;  // tensors by type name ("BF16", "Q4_K")
  for (const CheckpointTensorSpec& spec : checkpoint_tensors(config)) {
    expected.insert(spec.name);
    if (!weight_map.count(spec.name)) {
      problems.add(fail(kSection, Err::TensorMissing,
                        "tensor '" + spec.name + "' " + shape_string(spec.shape) +
                            ", which config.json implies, is not in the checkpoint" +
                            (indexed ? " index" : "")));
      continue;
    }
    auto it = found.find(spec.name);
    if (it == found.end()) continue;  // its shard failed above
    const TensorInfo& t = it->second;
    const std::string file = fs::path(t.file).filename().string();
    if (t.shape != spec.shape)
      problems.add(fail(kSection, spec.dtype ? Err::QuantTensorInvalid : Err::TensorShapeMismatch,
                        "tensor '" + spec.name + "' in " + file + " has shape " +
                            shape_string(t.shape) + " but config.json implies " +
                            shape_string(spec.shape)));
    if (spec.dtype && t.dtype != *spec.dtype)  // a quantized part (quantization_config)
      problems.add(fail(kSection, Err::QuantTensorInvalid,
                        "tensor '" + spec.name + "' in " + file + " is " +
                            std::string(dtype_name(t.dtype)) + " but the quantized format stores " +
                            std::string(dtype_name(*spec.dtype))));
    if (!spec.dtype && !is_float_weight(t.dtype) && !t.block_quantized())
      problems.add(fail(kSection, Err::DTypeUnsupported,
                        "tensor '" + spec.name + "' in " + file + " is " +
                            std::string(dtype_name(t.dtype)) +
                            "; qmpi computes with F32, F16 or BF16 weights"));
    ++dtypes[t.ggml ? std::string(t.ggml->name) : std::string(dtype_name(t.dtype))];
  }
  std::vector<std::string> extra;
  for (const auto& [name, file] : weight_map)
    if (!expected.count(name) && !is_rotary_buffer(name)) extra.push_back(name);
  extra.insert(extra.end(), inv.unlisted.begin(), inv.unlisted.end());
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 4; ++i) list += (i ? ", '" : "'") + extra[i] + "'";
    if (extra.size() > 4) list += ", ...";
    problems.add(warn(kSection, Err::TensorUnexpected,
                      std::to_string(extra.size()) +
                          " tensor(s) in the checkpoint are not part of the model config.json "
                          "describes, and qmpi ignores them: " +
                          list));
  }
  if (!problems.any(Err::TensorMissing) && !problems.any(Err::TensorShapeMismatch) &&
      !problems.any(Err::DTypeUnsupported) && !problems.any(Err::QuantTensorInvalid)) {
    std::string kinds;
    size_t checked = 0;
    for (const auto& [dt, n] : dtypes) {
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(n) + " " + dt;
      checked += n;
    }
    out.push_back(ok(kSection, checked == expected.size()
                                   ? "tensors: all " + std::to_string(expected.size()) +
                                         " tensors config.json implies are present with "
                                         "matching shapes (" +
                                         kinds + ")"
                                   : "tensors: the " + std::to_string(checked) + " of " +
                                         std::to_string(expected.size()) +
                                         " tensors in shards that open have the shapes "
                                         "config.json implies (" +
                                         kinds + ")"));
  }
}

// tokenizer.json (a GGUF file's own tokenizer, unless one sits beside it) loads and fits the
// embedding.
void tokenizer_findings(const std::string& model_dir, bool h5, bool gguf, const ModelConfig* config,
                        std::vector<Finding>& out) {
  try {
    const std::shared_ptr<const Tokenizer> tok =
        gguf ? load_model_tokenizer(model_dir)
             : std::make_shared<const Tokenizer>(load_tokenizer(model_dir, h5));
    if (config && tok->vocab_size() > config->vocab_size)
      out.push_back(fail(kSection, Err::TokenizerInvalid,
                         "tokenizer.json has ids up to " + std::to_string(tok->vocab_size() - 1) +
                             " but the embedding has only " + std::to_string(config->vocab_size) +
                             " rows (config.json)",
                         "Use the tokenizer.json that shipped with these weights."));
    else
      out.push_back(
          ok(kSection, "tokenizer.json: " + std::to_string(tok->vocab_size()) + " tokens, loads"));
  } catch (const Error& e) {
    out.push_back(fail(kSection, e));
  }
}

}  // namespace

ModelCheck check_model(const std::string& model_dir, const ConfigOverrides& overrides) {
  ModelCheck r;
  auto& out = r.findings;
  const bool h5 = fs::is_regular_file(model_dir) && is_h5_path(model_dir);
  const bool gguf = fs::is_regular_file(model_dir) && is_gguf_path(model_dir);
  if (!h5 && !gguf && !fs::is_directory(model_dir)) {
    out.push_back(
        fail(kSection, Err::ModelDirMissing,
             model_dir + (fs::exists(model_dir) ? " is neither a folder nor a .h5 or .gguf file"
                                                : " does not exist"),
             "Point --model at a Hugging Face model folder (config.json, safetensors, "
             "tokenizer.json), a qmpi .h5 file or a .gguf file."));
    return r;
  }
  try {
    r.config = ModelConfig::load(model_dir, overrides);
    out.push_back(ok(kSection, describe(*r.config)));
  } catch (const Error& e) {
    out.push_back(fail(kSection, e));
  }

  const Inventory inv = h5     ? h5_inventory(model_dir, out)
                        : gguf ? gguf_inventory(model_dir, out)
                               : safetensors_inventory(model_dir, out);
  for (const auto& [name, info] : inv.found) {
    if (info.block_quantized())
      r.tensor_blocks[name] = info.ggml;
    else
      r.tensor_dtypes[name] = info.dtype;
  }
  if (r.config && !inv.weight_map.empty()) tensor_findings(*r.config, inv, out);
  tokenizer_findings(model_dir, h5, gguf, r.config ? &*r.config : nullptr, out);
  return r;
}

std::vector<Finding> verify_sha256(const std::string& model_dir,
                                   const std::vector<ManifestEntry>& entries,
                                   const std::vector<size_t>& files, uint64_t* verified_bytes) {
  std::vector<Finding> out;
  uint64_t total = 0;
  for (size_t i : files) {
    const ManifestEntry& e = entries.at(i);
    const fs::path path =
        fs::path(e.file).is_absolute() ? fs::path(e.file) : fs::path(model_dir) / e.file;
    if (!fs::exists(path)) {
      const bool shard = path.extension() == ".safetensors";
      out.push_back(fail(kSection, shard ? Err::ShardMissing : Err::InputFile,
                         e.file + ", listed in the sha256 manifest, is missing from " + model_dir,
                         "Download " + e.file + " again."));
      continue;
    }
    try {
      uint64_t bytes = 0;
      const std::string got = sha256_file(path.string(), &bytes);
      total += bytes;
      if (got != e.sha256)
        out.push_back(fail(kSection, Err::ChecksumMismatch,
                           e.file + " has sha256 " + got + " but the manifest says " + e.sha256 +
                               " (" + format_bytes(bytes) + " read)",
                           "Download " + e.file +
                               " again and compare its size with the "
                               "repository's."));
    } catch (const Error& err) {
      out.push_back(fail(kSection, err));
    }
  }
  if (verified_bytes) *verified_bytes = total;
  return out;
}

}  // namespace qmpi::doctor
