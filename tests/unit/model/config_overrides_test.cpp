#include "model/config_overrides.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../expect_error.h"
#include "../temp_dir.h"
#include "model/config.h"
#include "model/presets.h"

namespace qmpi {
namespace {

using nlohmann::json;

TEST(ConfigOverrides, HfOverridesMergeObjectsKeyByKeyAndRopeScalingReplaces) {
  const json config = {{"max_position_embeddings", 32768},
                       {"rope_theta", 1e6},
                       {"rope_scaling", {{"type", "yarn"}, {"factor", 2.0}, {"beta_fast", 16}}}};
  ConfigOverrides o;
  o.hf_overrides = R"({"max_position_embeddings": 65536, "rope_scaling": {"factor": 4.0}})";
  json got = o.apply(config);
  EXPECT_EQ(got["max_position_embeddings"], 65536);
  EXPECT_EQ(got["rope_theta"], 1e6);
  EXPECT_EQ(got["rope_scaling"],
            (json{{"type", "yarn"}, {"factor", 4.0}, {"beta_fast", 16}}));  // merged
  o.rope_scaling = R"({"rope_type": "linear", "factor": 2})";
  got = o.apply(config);
  EXPECT_EQ(got["rope_scaling"], (json{{"rope_type", "linear"}, {"factor", 2}}));  // replaced
  o = {};
  o.rope_scaling = "null";  // no scaling, whatever the file says
  EXPECT_TRUE(o.apply(config)["rope_scaling"].is_null());
  EXPECT_EQ(ConfigOverrides{}.apply(config), config);
}

TEST(ConfigOverrides, BadTextIsAUsageErrorNamingTheOption) {
  ConfigOverrides o;
  o.rope_scaling = "{factor: 4}";
  testing::expect_error([&] { o.apply(json::object()); }, Err::Usage, {"--rope-scaling"});
  o = {};
  o.hf_overrides = "[1, 2]";
  testing::expect_error([&] { o.apply(json::object()); }, Err::Usage, {"--hf-overrides", "object"});
}

TEST(ConfigOverrides, LoadAppliesThemBeforeParsing) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.file("config.json"));
    f << preset_config("tiny").raw.dump();
  }
  ConfigOverrides o;
  o.rope_scaling =
      R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})";
  const ModelConfig c = ModelConfig::load(dir.str(), o);
  EXPECT_EQ(c.rope_scaling.kind, RopeKind::Yarn);
  EXPECT_EQ(c.derived_max_model_len(), 16384);
  EXPECT_EQ(c.raw["rope_scaling"]["factor"], 4.0);
  o.rope_scaling = R"({"rope_type": "longrope", "factor": 4.0})";
  testing::expect_error([&] { ModelConfig::load(dir.str(), o); }, Err::ArchUnsupported,
                        {"longrope", "--rope-scaling"});
}

}  // namespace
}  // namespace qmpi
