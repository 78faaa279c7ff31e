// `qmpi doctor --model`: a good folder passes every check; each kind of damage is reported with
// its catalogue code, naming the file or tensor, and all of them in one pass.
#include "doctor/model_checks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir.h"
#include "../text/text_test_util.h"
#include "io/checkpoint_dir.h"
#include "io/h5_convert.h"
#include "model/synthetic_checkpoint.h"
#include "model_check_test_util.h"

namespace qmpi::doctor {
namespace {

using fixtures::dump;
using fixtures::small_config;

namespace fs = std::filesystem;

// A 3-shard model with a tokenizer.json of 257 tokens.
void write_model(const std::string& dir, int shards = 3) {
  write_synthetic_checkpoint(dir, small_config(), 7, DType::BF16, shards);
  std::ofstream(dir + "/tokenizer.json") << test::tiny_tokenizer({{"h", "e"}}).dump();
}

void set_config(const std::string& dir, const std::string& key, nlohmann::json value) {
  nlohmann::json c;
  std::ifstream(dir + "/config.json") >> c;
  c[key] = std::move(value);
  std::ofstream(dir + "/config.json") << c.dump();
}

std::string shard(const std::string& dir, int i) {
  return dir + "/model-0000" + std::to_string(i) + "-of-00003.safetensors";
}

std::vector<const Finding*> with_code(const ModelCheck& r, Err code) {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings)
    if (f.code == code) out.push_back(&f);
  return out;
}

size_t fails(const ModelCheck& r) {
  size_t n = 0;
  for (const Finding& f : r.findings) n += f.status == Status::Fail;
  return n;
}

TEST(ModelChecks, GoodModelPassesEveryCheck) {
  testing::TempDir dir;
  write_model(dir.str());
  const ModelCheck r = check_model(dir.str());
  EXPECT_EQ(fails(r), 0u) << dump(r);
  ASSERT_TRUE(r.config.has_value());
  EXPECT_EQ(r.config->hidden_size, 32);
  EXPECT_EQ(r.tensor_dtypes.size(), 2u + 2 * 12);  // embed, norm, 12 per layer
  const std::string text = dump(r);
  EXPECT_NE(text.find("weights: 3 shard(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("all 26 tensors config.json implies are present"), std::string::npos) << text;
  EXPECT_NE(text.find("tokenizer.json: 257 tokens"), std::string::npos) << text;
}

TEST(ModelChecks, TruncatedShardIsShardTruncatedAndTheOthersAreStillChecked) {
  testing::TempDir dir;
  write_model(dir.str());
  fs::resize_file(shard(dir.str(), 2), fs::file_size(shard(dir.str(), 2)) - 100);
  const ModelCheck r = check_model(dir.str());
  const auto t = with_code(r, Err::ShardTruncated);
  ASSERT_EQ(t.size(), 1u) << dump(r);
  EXPECT_NE(t[0]->message.find("model-00002-of-00003.safetensors"), std::string::npos);
  EXPECT_NE(t[0]->message.find("100 missing"), std::string::npos) << t[0]->message;
  EXPECT_EQ(fails(r), 1u) << dump(r);  // its tensors are not reported again as missing
  EXPECT_NE(dump(r).find("tensors in shards that open have the shapes"), std::string::npos);
}

TEST(ModelChecks, MissingShardNamesTheFileAndItsTensors) {
  testing::TempDir dir;
  write_model(dir.str());
  fs::remove(shard(dir.str(), 3));
  const ModelCheck r = check_model(dir.str());
  const auto m = with_code(r, Err::ShardMissing);
  ASSERT_EQ(m.size(), 1u) << dump(r);
  EXPECT_NE(m[0]->message.find("model-00003-of-00003.safetensors is missing"), std::string::npos);
  EXPECT_NE(m[0]->fix.find("Download model-00003-of-00003.safetensors"), std::string::npos);
  EXPECT_EQ(fails(r), 1u) << dump(r);
}

TEST(ModelChecks, ConfigOfAnotherShapeReportsShapeMismatchesCapped) {
  testing::TempDir dir;
  write_model(dir.str());
  set_config(dir.str(), "hidden_size", 48);  // every tensor but the MLP's input sizes changes
  const ModelCheck r = check_model(dir.str());
  const auto m = with_code(r, Err::TensorShapeMismatch);
  ASSERT_EQ(m.size(), kMaxFindingsPerCode + 1) << dump(r);
  EXPECT_NE(m[0]->message.find("'model.embed_tokens.weight' in model-00001-of-00003.safetensors "
                               "has shape [512, 32] but config.json implies [512, 48]"),
            std::string::npos)
      << m[0]->message;
  EXPECT_NE(m.back()->message.find("more tensor-shape-mismatch problems"), std::string::npos);
}

TEST(ModelChecks, MissingTensorsAndExtraLayersAreBothFound) {
  testing::TempDir dir;
  write_model(dir.str());
  set_config(dir.str(), "num_hidden_layers", 1);  // layer 1 in the files is extra
  ModelCheck r = check_model(dir.str());
  auto extra = with_code(r, Err::TensorUnexpected);
  ASSERT_EQ(extra.size(), 1u) << dump(r);
  EXPECT_EQ(extra[0]->status, Status::Warn);
  EXPECT_NE(extra[0]->message.find("12 tensor(s)"), std::string::npos) << extra[0]->message;

  set_config(dir.str(), "num_hidden_layers", 3);  // layer 2 is missing
  r = check_model(dir.str());
  const auto missing = with_code(r, Err::TensorMissing);
  ASSERT_EQ(missing.size(), kMaxFindingsPerCode + 1) << dump(r);
  EXPECT_NE(missing[0]->message.find("'model.layers.2."), std::string::npos) << missing[0]->message;
}

TEST(ModelChecks, IndexEntryForATensorItsShardLacksIsTensorMissing) {
  testing::TempDir dir;
  write_model(dir.str());
  nlohmann::json index;
  std::ifstream(dir.file("model.safetensors.index.json")) >> index;
  index["weight_map"]["model.layers.0.mlp.extra.weight"] = "model-00001-of-00003.safetensors";
  std::ofstream(dir.file("model.safetensors.index.json")) << index.dump();
  const ModelCheck r = check_model(dir.str());
  const auto m = with_code(r, Err::TensorMissing);
  ASSERT_EQ(m.size(), 1u) << dump(r);
  EXPECT_NE(m[0]->message.find("'model.layers.0.mlp.extra.weight' is mapped to "
                               "model-00001-of-00003.safetensors"),
            std::string::npos);
}

TEST(ModelChecks, BrokenIndexConfigAndTokenizerAreEachReported) {
  testing::TempDir dir;
  write_model(dir.str());
  std::ofstream(dir.file("model.safetensors.index.json")) << "{\"weight_map\": ";
  std::ofstream(dir.file("config.json")) << "<html>not found</html>";
  fs::remove(dir.file("tokenizer.json"));
  const ModelCheck r = check_model(dir.str());
  EXPECT_EQ(with_code(r, Err::IndexInvalid).size(), 1u) << dump(r);
  EXPECT_EQ(with_code(r, Err::ConfigInvalid).size(), 1u) << dump(r);
  EXPECT_EQ(with_code(r, Err::TokenizerMissing).size(), 1u) << dump(r);
  EXPECT_FALSE(r.config.has_value());
}

TEST(ModelChecks, TokenizerLargerThanTheEmbeddingIsTokenizerInvalid) {
  testing::TempDir dir;
  write_model(dir.str(), 1);
  set_config(dir.str(), "vocab_size", 200);
  const ModelCheck r = check_model(dir.str());
  const auto t = with_code(r, Err::TokenizerInvalid);
  ASSERT_EQ(t.size(), 1u) << dump(r);
  EXPECT_NE(t[0]->message.find("ids up to 256 but the embedding has only 200 rows"),
            std::string::npos)
      << t[0]->message;
}

TEST(ModelChecks, H5CheckpointIsCheckedAndATruncatedOneFails) {
  testing::TempDir dir;
  write_model(dir.str(), 1);
  auto read = [&](const std::string& f) {
    std::ifstream in(dir.file(f));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  SafetensorsDir src(dir.str());
  H5ConvertOptions opts;
  opts.meta = {{"config.json", read("config.json")}, {"tokenizer.json", read("tokenizer.json")}};
  const std::string h5 = dir.file("model.h5");
  convert_to_h5(src, h5, opts);
  ModelCheck r = check_model(h5);
  EXPECT_EQ(fails(r), 0u) << dump(r);
  EXPECT_NE(dump(r).find("all 26 tensors config.json implies are present"), std::string::npos)
      << dump(r);
  EXPECT_NE(dump(r).find("tokenizer.json: 257 tokens"), std::string::npos) << dump(r);

  fs::resize_file(h5, fs::file_size(h5) / 2);
  r = check_model(h5);
  EXPECT_FALSE(with_code(r, Err::H5Format).empty()) << dump(r);
}

TEST(ModelChecks, MissingFolderIsModelDirMissing) {
  const ModelCheck r = check_model("/nonexistent/qmpi-model");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].code, Err::ModelDirMissing);
}

TEST(ModelChecks, Sha256MismatchAndMissingFilesAreReported) {
  testing::TempDir dir;
  write_model(dir.str());
  const std::string good = sha256_file(dir.file("config.json"));
  const std::vector<ManifestEntry> entries = {
      {good, "config.json"},
      {std::string(64, '0'), "model-00002-of-00003.safetensors"},
      {std::string(64, '1'), "model-00009-of-00009.safetensors"},
      {std::string(64, '2'), "notes.txt"}};
  uint64_t bytes = 0;
  const auto out = verify_sha256(dir.str(), entries, {0, 1, 2, 3}, &bytes);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].code, Err::ChecksumMismatch);
  EXPECT_NE(out[0].message.find("model-00002-of-00003.safetensors has sha256"), std::string::npos);
  EXPECT_EQ(out[1].code, Err::ShardMissing);
  EXPECT_EQ(out[2].code, Err::InputFile);
  EXPECT_EQ(bytes, fs::file_size(dir.file("config.json")) +
                       fs::file_size(dir.file("model-00002-of-00003.safetensors")));
  EXPECT_TRUE(verify_sha256(dir.str(), entries, {0}, nullptr).empty());
}

}  // namespace
}  // namespace qmpi::doctor
