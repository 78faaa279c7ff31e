#include "io/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../expect_error.h"
#include "../temp_dir.h"
#include "io/safetensors_writer.h"

namespace qmpi {
namespace {

using testing::TempDir;

using testing::expect_error;

// Element (r, c) of tensor `salt` is a float that encodes its position.
float value_at(int salt, int64_t flat) {
  return float(salt * 100000 + flat);
}

void add_f32(SafetensorsWriter& w, const std::string& name, std::vector<int64_t> shape, int salt) {
  w.add(name, DType::F32, std::move(shape), [salt](int64_t first, int64_t count, void* dst) {
    auto* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < count; ++i) out[i] = value_at(salt, first + i);
  });
}

std::vector<float> read_floats(WeightSource& src, const std::string& name, const Slice& s) {
  std::vector<float> out(size_t(slice_numel(src.info(name).shape, s)));
  src.read(name, s, out.data());
  return out;
}

// A 3-shard checkpoint: shard 1 {embed [10,6]}, shard 2 {w [8,5], b [8]}, shard 3 {norm [6]}.
void write_sharded(const std::string& dir) {
  SafetensorsWriter s1, s2, s3;
  add_f32(s1, "embed", {10, 6}, 1);
  add_f32(s2, "w", {8, 5}, 2);
  add_f32(s2, "b", {8}, 3);
  add_f32(s3, "norm", {6}, 4);
  s1.write(dir + "/model-00001-of-00003.safetensors");
  s2.write(dir + "/model-00002-of-00003.safetensors");
  s3.write(dir + "/model-00003-of-00003.safetensors");
  write_safetensors_index(dir, s1.data_bytes() + s2.data_bytes() + s3.data_bytes(),
                          {{"embed", "model-00001-of-00003.safetensors"},
                           {"w", "model-00002-of-00003.safetensors"},
                           {"b", "model-00002-of-00003.safetensors"},
                           {"norm", "model-00003-of-00003.safetensors"}});
}

TEST(SafetensorsDir, SingleFileWholeRowAndColumnSlices) {
  TempDir dir;
  SafetensorsWriter w;
  add_f32(w, "w", {6, 9}, 7);
  add_f32(w, "v", {5}, 8);
  w.write(dir.file("model.safetensors"));
  SafetensorsDir src(dir.str());
  EXPECT_TRUE(src.has("w"));
  EXPECT_FALSE(src.has("x"));
  EXPECT_EQ(src.names(), (std::vector<std::string>{"w", "v"}));

  const auto whole = read_floats(src, "w", Slice::whole());
  ASSERT_EQ(whole.size(), 54u);
  EXPECT_EQ(src.bytes_read(), 54u * 4);

  const auto rows = read_floats(src, "w", {0, 2, 3});  // rows 2..4
  ASSERT_EQ(rows.size(), 27u);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 9; ++c) EXPECT_EQ(rows[r * 9 + c], whole[(r + 2) * 9 + c]);
  EXPECT_EQ(src.bytes_read(), (54u + 27u) * 4);

  const auto cols = read_floats(src, "w", {1, 4, 3});  // columns 4..6 of every row
  ASSERT_EQ(cols.size(), 18u);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(cols[r * 3 + c], whole[r * 9 + c + 4]);
  EXPECT_EQ(src.bytes_read(), (54u + 27u + 18u) * 4);

  const auto v = read_floats(src, "v", {0, 1, 3});
  EXPECT_EQ(v, (std::vector<float>{value_at(8, 1), value_at(8, 2), value_at(8, 3)}));
}

TEST(SafetensorsDir, ShardedIndex) {
  TempDir dir;
  write_sharded(dir.str());
  SafetensorsDir src(dir.str());
  EXPECT_EQ(src.shards().size(), 3u);
  EXPECT_EQ(src.names().size(), 4u);
  EXPECT_NE(src.info("b").file.find("model-00002-of-00003.safetensors"), std::string::npos);
  EXPECT_EQ(src.info("embed").shape, (std::vector<int64_t>{10, 6}));
  const auto e = read_floats(src, "embed", {0, 9, 1});
  for (int c = 0; c < 6; ++c) EXPECT_EQ(e[c], value_at(1, 9 * 6 + c));
  const auto w = read_floats(src, "w", {1, 4, 1});
  for (int r = 0; r < 8; ++r) EXPECT_EQ(w[r], value_at(2, r * 5 + 4));
  EXPECT_EQ(read_floats(src, "norm", Slice::whole()).back(), value_at(4, 5));
  expect_error([&] { src.info("lm_head.weight"); }, Err::TensorMissing, {"'lm_head.weight'"});
}

TEST(SafetensorsDir, MissingShardNamedInIndex) {
  TempDir dir;
  write_sharded(dir.str());
  std::filesystem::remove(dir.file("model-00002-of-00003.safetensors"));
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::ShardMissing,
               {"model-00002-of-00003.safetensors", "model.safetensors.index.json"});
}

TEST(SafetensorsDir, IndexNamesTensorTheShardLacks) {
  TempDir dir;
  write_sharded(dir.str());
  write_safetensors_index(dir.str(), 0,
                          {{"embed", "model-00001-of-00003.safetensors"},
                           {"ghost", "model-00003-of-00003.safetensors"}});
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::TensorMissing,
               {"'ghost'", "model-00003-of-00003.safetensors"});
}

TEST(SafetensorsDir, InvalidIndex) {
  TempDir dir;
  write_sharded(dir.str());
  std::ofstream(dir.file("model.safetensors.index.json")) << "{\"weight_map\": {";
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::IndexInvalid,
               {"model.safetensors.index.json", "not valid JSON"});
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"weight_map": {"w": "../elsewhere.safetensors"}})";
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::IndexInvalid, {"'w'", "elsewhere"});
}

TEST(SafetensorsDir, FolderWithoutWeights) {
  TempDir dir;
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::ModelDirMissing,
               {dir.str(), "model.safetensors"});
}

TEST(SafetensorsDir, CorruptShardIsReportedByName) {
  TempDir dir;
  write_sharded(dir.str());
  const std::string shard = dir.file("model-00003-of-00003.safetensors");
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 4);
  expect_error([&] { SafetensorsDir src(dir.str()); }, Err::ShardTruncated, {shard});
}

TEST(SafetensorsDir, MisalignedDataStillReads) {
  TempDir dir;
  // A 109-byte header and 2 bytes of U8 put the F32 tensor at file offset 119: misaligned.
  const std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                             R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[2,26]}})";
  std::ofstream out(dir.file("model.safetensors"), std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(char(uint64_t(header.size()) >> (8 * i)));
  out << header;
  out.write("\x01\x02", 2);
  for (int i = 0; i < 6; ++i) {
    float f = float(i) + 0.5f;
    out.write(reinterpret_cast<const char*>(&f), 4);
  }
  out.close();
  SafetensorsDir src(dir.str());
  ASSERT_NE(reinterpret_cast<uintptr_t>(src.shards()[0].data("w")) % 4, 0u);
  EXPECT_EQ(read_floats(src, "w", {1, 1, 2}), (std::vector<float>{1.5f, 2.5f, 4.5f, 5.5f}));
  EXPECT_EQ(read_floats(src, "w", {0, 1, 1}), (std::vector<float>{3.5f, 4.5f, 5.5f}));
}

}  // namespace
}  // namespace qmpi
