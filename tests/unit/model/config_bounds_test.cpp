// confirm_config_with_weights: the checkpoint must confirm config.json's layer and expert counts
// and the embedding's size before the loader sizes anything from them.
#include "model/config_bounds.h"

#include <gtest/gtest.h>

#include "../temp_dir.h"
#include "core/errors.h"
#include "model/presets.h"
#include "model/synthetic_checkpoint.h"

namespace qmpi {
namespace {

using nlohmann::json;
using testing::TempDir;

Error confirm_error(const json& config, const WeightSource& src) {
  try {
    confirm_config_with_weights(ModelConfig::from_json(config, "c"), src);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << config.dump();
  return Error(Err::Internal, "none");
}

TEST(ConfirmConfig, CountsAndWidthsMustMatchTheCheckpoint) {
  for (const char* preset : {"tiny", "tiny-qwen3-moe"}) {
    TempDir dir;
    json j = preset_config(preset).raw;
    j["num_hidden_layers"] = 2;
    j["vocab_size"] = 512;  // a small embedding: quick to write
    write_synthetic_checkpoint(dir.str(), j, 1, DType::F32, 1);
    const auto src = open_weight_source(dir.str());
    EXPECT_NO_THROW(confirm_config_with_weights(ModelConfig::from_json(j, "c"), *src)) << preset;

    json more = j;
    more["num_hidden_layers"] = 900;
    Error e = confirm_error(more, *src);
    EXPECT_EQ(e.code(), Err::TensorMissing) << preset;
    EXPECT_NE(e.message().find("model.layers.899.input_layernorm.weight"), std::string::npos)
        << e.message();
    json fewer = j;
    fewer["num_hidden_layers"] = 1;
    EXPECT_EQ(confirm_error(fewer, *src).code(), Err::ConfigInvalid) << preset;
    json vocab = j;
    vocab["vocab_size"] = j["vocab_size"].get<int64_t>() * 2;
    e = confirm_error(vocab, *src);
    EXPECT_EQ(e.code(), Err::TensorShapeMismatch) << preset;
    EXPECT_NE(e.message().find("vocab_size"), std::string::npos) << e.message();
    if (j.contains("num_experts")) {
      json experts = j;
      experts["num_experts"] = 4000;
      e = confirm_error(experts, *src);
      EXPECT_EQ(e.code(), Err::TensorMissing);
      EXPECT_NE(e.message().find("experts.3999."), std::string::npos) << e.message();
      experts["num_experts"] = j["num_experts"].get<int64_t>() - 1;
      EXPECT_EQ(confirm_error(experts, *src).code(), Err::ConfigInvalid);
    }
  }
}

}  // namespace
}  // namespace qmpi
