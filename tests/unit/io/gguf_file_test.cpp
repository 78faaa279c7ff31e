#include "io/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "../expect_error.h"
#include "../gguf_builder.h"
#include "../temp_dir.h"
#include "io/gguf_weights.h"

namespace qmpi {
namespace {

using testing::expect_error;
using testing::GgufBuilder;
using testing::TempDir;

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + 3);
  return v;
}

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kIQ2_XXS = 16;

// A small valid model file: metadata of several kinds and an F32 vector plus a Q8_0 matrix
// [3 rows, 64 cols] (two 34-byte blocks per row).
GgufBuilder valid() {
  GgufBuilder b;
  b.string("general.architecture", "qwen2");
  b.scalar<uint32_t>("qwen2.block_count", GgufKind::U32, 2);
  b.scalar<float>("qwen2.rope.freq_base", GgufKind::F32, 1e6f);
  b.scalar<uint8_t>("tokenizer.ggml.add_bos_token", GgufKind::Bool, 0);
  b.scalar<int64_t>("x.i64", GgufKind::I64, -5);
  b.scalar<double>("x.f64", GgufKind::F64, 0.25);
  b.strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  b.i32s("tokenizer.ggml.token_type", {1, 1, 3});
  b.tensor("output_norm.weight", {64}, kF32, pattern(256));
  b.tensor("blk.0.attn_q.weight", {64, 3}, kQ8_0, pattern(3 * 2 * 34));
  return b;
}

TEST(GgufFile, ReadsMetadataAndTensors) {
  TempDir dir;
  valid().write(dir.file("m.gguf"));
  GgufFile f(dir.file("m.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.string("general.architecture"), "qwen2");
  EXPECT_EQ(f.integer("qwen2.block_count"), 2);
  EXPECT_DOUBLE_EQ(*f.number("qwen2.rope.freq_base"), 1e6);
  EXPECT_EQ(f.boolean("tokenizer.ggml.add_bos_token"), false);
  EXPECT_EQ(f.integer("x.i64"), -5);
  EXPECT_DOUBLE_EQ(*f.number("x.f64"), 0.25);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings, (std::vector<std::string>{"a", "b", "ab"}));
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->ints, (std::vector<int64_t>{1, 1, 3}));
  EXPECT_FALSE(f.integer("absent"));
  expect_error([&] { f.integer("general.architecture"); }, Err::GgufMetadata,
               {"general.architecture", "string", "integer"});
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensor& q = f.tensors()[1];
  EXPECT_EQ(q.ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(q.type->name, "Q8_0");
  EXPECT_EQ(q.nbytes, 3u * 68);
  EXPECT_EQ(q.offset % 32, 0u);
}

TEST(GgufWeights, ShapesOutermostFirstAndBlockSlices) {
  TempDir dir;
  valid().write(dir.file("m.gguf"));
  GgufWeights w(dir.file("m.gguf"));
  const TensorInfo& q = w.info("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{3, 64}));
  EXPECT_TRUE(q.block_quantized());
  EXPECT_EQ(w.info("output_norm.weight").dtype, DType::F32);
  const auto all = pattern(3 * 68);
  // Rows 1-2: contiguous.
  std::vector<uint8_t> rows(2 * 68);
  w.read("blk.0.attn_q.weight", Slice{0, 1, 2}, rows.data());
  EXPECT_EQ(0, std::memcmp(rows.data(), all.data() + 68, rows.size()));
  // Columns 32-63: the second block of each row.
  std::vector<uint8_t> cols(3 * 34);
  w.read("blk.0.attn_q.weight", Slice{1, 32, 32}, cols.data());
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(0, std::memcmp(cols.data() + r * 34, all.data() + r * 68 + 34, 34)) << r;
  EXPECT_THROW(w.read("blk.0.attn_q.weight", Slice{1, 16, 32}, cols.data()), Error);
  EXPECT_EQ(w.bytes_read(), rows.size() + cols.size());
}

TEST(GgufFile, WrongMagicOrVersion) {
  TempDir dir;
  GgufBuilder b = valid();
  b.magic = 0x46554746;
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufHeader, {"m.gguf", "magic"});
  for (uint32_t v : {1u, 4u, 0x03000000u}) {
    b = valid();
    b.version = v;
    b.write(dir.file("m.gguf"));
    expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufHeader,
                 {"version " + std::to_string(v)});
  }
  b = valid();
  b.version = 2;
  b.write(dir.file("m.gguf"));
  EXPECT_EQ(GgufFile(dir.file("m.gguf")).version(), 2u);
}

TEST(GgufFile, EveryTruncationIsNamed) {
  TempDir dir;
  const GgufBuilder b = valid();
  const size_t size = b.bytes().size();
  for (size_t cut = 0; cut < size; cut += 7) {
    b.write(dir.file("m.gguf"), cut);
    expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTruncated, {"m.gguf"});
  }
}

TEST(GgufFile, AbsurdCountsAndValueTypes) {
  TempDir dir;
  GgufBuilder b = valid();
  b.n_tensors = uint64_t(1) << 60;
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufMetadata, {"tensors"});
  b = valid();
  GgufBuilder::put_str(b.kv, "bad.array");
  GgufBuilder::put<uint32_t>(b.kv, uint32_t(GgufKind::Array));
  GgufBuilder::put<uint32_t>(b.kv, uint32_t(GgufKind::U32));
  GgufBuilder::put<uint64_t>(b.kv, uint64_t(1) << 50);
  ++b.n_kv;
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufMetadata, {"bad.array"});
  b = valid();
  b.scalar<uint32_t>("bad.kind", GgufKind(13), 0);
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufMetadata, {"bad.kind", "13"});
}

TEST(GgufFile, UnknownAndUnsupportedTensorTypes) {
  TempDir dir;
  GgufBuilder b = valid();
  b.tensor("blk.0.attn_k.weight", {32, 1}, 99, pattern(34));
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTensorType,
               {"blk.0.attn_k.weight", "99"});
  b = valid();
  b.tensor("blk.0.attn_k.weight", {256, 1}, kIQ2_XXS, pattern(66));
  b.write(dir.file("m.gguf"));
  try {
    GgufFile f(dir.file("m.gguf"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::GgufTensorType);
    EXPECT_NE(e.message().find("IQ2_XXS"), std::string::npos) << e.message();
    EXPECT_NE(e.fix().find("Q4_K"), std::string::npos) << e.fix();
  }
}

TEST(GgufFile, SizeDisagreesWithTypeAndShape) {
  TempDir dir;
  // Rows of 40 elements are not whole Q8_0 blocks.
  GgufBuilder b = valid();
  b.tensor("blk.0.attn_k.weight", {40, 2}, kQ8_0, pattern(80));
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTensorData,
               {"blk.0.attn_k.weight", "40", "blocks of 32"});
  // A tensor whose type x shape is larger than the room before the next one.
  b = GgufBuilder();
  b.tensor("a", {64, 4}, kQ8_0, pattern(64));  // needs 272 bytes
  b.tensor("b", {8}, kF32, pattern(32));
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTensorData,
               {"tensor a", "272 bytes", "runs into tensor b"});
  // The last tensor's bytes past the end of the file.
  b = GgufBuilder();
  b.tensor("a", {64, 4}, kQ8_0, pattern(200));
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTruncated,
               {"tensor a", "272 bytes"});
  // Offsets outside the file, and misaligned.
  b = valid();
  b.tensor("far", {8}, kF32, {}, int64_t(1) << 40);
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTruncated,
               {"far", "past the end"});
  b = valid();
  b.tensor("odd", {8}, kF32, {}, 36);
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTensorData, {"odd", "align"});
  b = valid();
  b.tensor("wide", {8, 1, 1, 1, 1}, kF32, pattern(32));
  b.write(dir.file("m.gguf"));
  expect_error([&] { GgufFile f(dir.file("m.gguf")); }, Err::GgufTensorData,
               {"wide", "5 dimensions"});
}

// Two parts: the first with the metadata and one tensor, the second with the other.
void write_split(const TempDir& dir, bool second) {
  GgufBuilder a;
  a.string("general.architecture", "qwen2");
  a.scalar<uint16_t>("split.no", GgufKind::U16, 0);
  a.scalar<uint16_t>("split.count", GgufKind::U16, 2);
  a.scalar<int32_t>("split.tensors.count", GgufKind::I32, 2);
  a.tensor("t0", {8}, kF32, pattern(32));
  a.write(dir.file("m-00001-of-00002.gguf"));
  if (!second) return;
  GgufBuilder b;
  b.scalar<uint16_t>("split.no", GgufKind::U16, 1);
  b.scalar<uint16_t>("split.count", GgufKind::U16, 2);
  b.tensor("t1", {64, 2}, kQ8_0, pattern(136));
  b.write(dir.file("m-00002-of-00002.gguf"));
}

TEST(GgufWeights, SplitPartsReadAsOne) {
  TempDir dir;
  write_split(dir, true);
  GgufWeights w(dir.file("m-00001-of-00002.gguf"));
  EXPECT_EQ(w.names(), (std::vector<std::string>{"t0", "t1"}));
  EXPECT_EQ(w.info("t1").file, dir.file("m-00002-of-00002.gguf"));
  std::vector<uint8_t> out(136);
  w.read("t1", Slice::whole(), out.data());
  EXPECT_EQ(out, pattern(136));
  expect_error([&] { GgufWeights x(dir.file("m-00002-of-00002.gguf")); }, Err::GgufSplit,
               {"part 2", "m-00001-of-00002.gguf"});
}

TEST(GgufWeights, MissingSplitPart) {
  TempDir dir;
  write_split(dir, false);
  expect_error([&] { GgufWeights x(dir.file("m-00001-of-00002.gguf")); }, Err::GgufSplit,
               {"m-00002-of-00002.gguf"});
}

}  // namespace
}  // namespace qmpi
