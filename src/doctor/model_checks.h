// Model checks of `qmpi doctor --model DIR`: everything the loader would trip over, found in one
// pass instead of one error per launch. config.json parses (and names a supported
// architecture); the index covers every tensor the config implies and nothing else; every shard
// is present, its header parses and the file has the size the header implies; shapes and dtypes
// match the config; tokenizer.json loads. Reads headers only, never the tensor data.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "doctor/finding.h"
#include "doctor/sha256.h"
#include "model/config.h"

namespace qmpi::doctor {

// Findings of one kind beyond this many are summed up in one line ("... and 40 more").
inline constexpr size_t kMaxFindingsPerCode = 6;

struct ModelCheck {
  std::vector<Finding> findings;
  std::optional<ModelConfig> config;           // when config.json parsed
  std::map<std::string, DType> tensor_dtypes;  // from the headers that parsed, for the planner
  std::map<std::string, const GgmlTypeInfo*> tensor_blocks;  // GGUF block types, likewise
};

ModelCheck check_model(const std::string& model_dir, const ConfigOverrides& overrides = {});

// The manifest's entries with `files` (indices into `entries`) checked: FAIL ChecksumMismatch
// naming the file and both digests, FAIL ShardMissing / InputFile for a file that cannot be
// read. Relative names are relative to `model_dir`. `verified_bytes` receives the bytes hashed.
std::vector<Finding> verify_sha256(const std::string& model_dir,
                                   const std::vector<ManifestEntry>& entries,
                                   const std::vector<size_t>& files, uint64_t* verified_bytes);

}  // namespace qmpi::doctor
