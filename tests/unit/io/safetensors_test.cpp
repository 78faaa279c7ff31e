#include "io/safetensors.h"

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

// A raw safetensors file: 8-byte length (or `length_override`), header text, data bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               int64_t length_override = -1) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = length_override >= 0 ? uint64_t(length_override) : header.size();
  for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
  out << header;
  for (size_t i = 0; i < data_bytes; ++i) out.put(char(i));
}

// Runs `fn`, expects Error(code) whose message contains every string of `needles`.
using testing::expect_error;

std::vector<uint8_t> pattern(size_t n, uint8_t salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 31 + salt);
  return v;
}

SafetensorsWriter::Fill from_bytes(const std::vector<uint8_t>& bytes, size_t esize) {
  return [&bytes, esize](int64_t first, int64_t count, void* dst) {
    std::memcpy(dst, bytes.data() + first * esize, size_t(count) * esize);
  };
}

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, WrittenBytesReadBackAligned) {
  TempDir dir;
  const DType dt = GetParam();
  const size_t es = dtype_size(dt);
  auto a = pattern(5 * 7 * es, 1), b = pattern(3 * es, 2), c = pattern(11, 3),
       d = pattern(4 * 4, 4);
  SafetensorsWriter w;
  w.set_metadata({{"format", "pt"}});
  w.add("odd.u8", DType::U8, {11}, from_bytes(c, 1));  // declared first, must not misalign the rest
  w.add("w", dt, {5, 7}, from_bytes(a, es));
  w.add("b", dt, {3}, from_bytes(b, es));
  w.add("ids", DType::I32, {4}, from_bytes(d, 4));
  const std::string path = dir.file("m.safetensors");
  const uint64_t size = w.write(path);
  EXPECT_EQ(size, std::filesystem::file_size(path));

  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 4u);
  for (const auto& t : f.tensors())  // the map is page-aligned, so file offsets show through
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.data(t.name)) % dtype_size(t.dtype), 0u) << t.name;
  EXPECT_EQ(f.tensors().back().name, "odd.u8");  // laid out by descending element size
  const TensorInfo* wi = f.find("w");
  ASSERT_NE(wi, nullptr);
  EXPECT_EQ(wi->dtype, dt);
  EXPECT_EQ(wi->shape, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(wi->nbytes, a.size());
  EXPECT_EQ(wi->file, path);
  EXPECT_EQ(std::memcmp(f.data("w"), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(f.data("b"), b.data(), b.size()), 0);
  EXPECT_EQ(std::memcmp(f.data("odd.u8"), c.data(), c.size()), 0);
  EXPECT_EQ(std::memcmp(f.data("ids"), d.data(), d.size()), 0);
  EXPECT_EQ(f.find("ids")->dtype, DType::I32);  // integer types are accepted and reported
  EXPECT_EQ(f.find("nope"), nullptr);

  // Header length is a multiple of 8 (space padded), so data starts 8-aligned in the file.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RoundTrip, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Safetensors, LargeTensorIsWrittenInChunks) {
  TempDir dir;
  SafetensorsWriter w;
  int calls = 0;
  const int64_t n = 5'000'000;  // 20 MB of F32: more than one 8 MiB chunk
  w.add("big", DType::F32, {n}, [&calls](int64_t first, int64_t count, void* dst) {
    ++calls;
    auto* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < count; ++i) out[i] = float(first + i);
  });
  w.write(dir.file("big.safetensors"));
  EXPECT_GE(calls, 3);
  SafetensorsFile f(dir.file("big.safetensors"));
  float last;
  std::memcpy(&last, f.data("big") + (n - 1) * 4, 4);
  EXPECT_EQ(last, float(n - 1));
}

TEST(Safetensors, ScalarsAndZeroSizedTensorsAreLegal) {
  TempDir dir;
  const std::string path = dir.file("s.safetensors");
  write_raw(path,
            R"({"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
            R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
            4);
  SafetensorsFile f(path);
  EXPECT_EQ(f.find("empty")->nbytes, 0u);
  EXPECT_TRUE(f.find("s")->shape.empty());
  EXPECT_EQ(f.find("s")->nbytes, 4u);
}

TEST(SafetensorsCorrupt, FileShorterThanEightBytes) {
  TempDir dir;
  const std::string path = dir.file("short.safetensors");
  std::ofstream(path) << "abc";
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "3 bytes"});
}

TEST(SafetensorsCorrupt, HeaderLengthPastEndOfFile) {
  TempDir dir;
  const std::string path = dir.file("h.safetensors");
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, 5000);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader,
               {path, "5000", "past the end"});
}

TEST(SafetensorsCorrupt, HeaderLengthOverLimit) {
  TempDir dir;
  const std::string path = dir.file("h.safetensors");
  write_raw(path, "{}", 0, 200'000'000);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "200000000"});
}

TEST(SafetensorsCorrupt, InvalidJsonHeader) {
  TempDir dir;
  const std::string path = dir.file("j.safetensors");
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4);  // one } short
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "JSON"});
}

TEST(SafetensorsCorrupt, DuplicateTensorName) {
  TempDir dir;
  const std::string path = dir.file("d.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            8);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "'a' twice"});
}

TEST(SafetensorsCorrupt, UnknownDtype) {
  TempDir dir;
  const std::string path = dir.file("u.safetensors");
  write_raw(path, R"({"w":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]}})", 4);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "'w'", "Q4_K"});
}

TEST(SafetensorsCorrupt, TruncatedShard) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  SafetensorsWriter w;
  auto a = pattern(64 * 4, 0);
  w.add("w", DType::F32, {64}, from_bytes(a, 4));
  const uint64_t size = w.write(path);
  std::filesystem::resize_file(path, size - 10);
  expect_error([&] { SafetensorsFile f(path); }, Err::ShardTruncated,
               {path, std::to_string(size - 10) + " bytes", std::to_string(size) + " bytes"});
}

TEST(SafetensorsCorrupt, OffsetsOutOfRange) {
  TempDir dir;
  const std::string path = dir.file("o.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("far":{"dtype":"F32","shape":[1],"data_offsets":[4000,4004]}})",
            8);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsOffsets,
               {path, "'far'", "past the end of the data buffer"});
}

TEST(SafetensorsCorrupt, OverlappingOffsets) {
  TempDir dir;
  const std::string path = dir.file("o.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            12);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsOffsets,
               {path, "'b'", "overlap", "'a'"});
}

TEST(SafetensorsCorrupt, ByteRangeDoesNotMatchShape) {
  TempDir dir;
  const std::string path = dir.file("s.safetensors");
  write_raw(path, R"({"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,20]}})", 20);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsOffsets,
               {path, "'w'", "20 bytes", "[3, 4]", "24"});
}

TEST(SafetensorsCorrupt, GapBetweenTensors) {
  TempDir dir;
  const std::string path = dir.file("g.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            12);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsOffsets,
               {path, "4 unused bytes between tensor 'a' and tensor 'b'", "entry", "damaged"});
}

TEST(SafetensorsCorrupt, BytesAfterLastTensor) {
  TempDir dir;
  const std::string path = dir.file("tail.safetensors");
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 9);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsOffsets,
               {path, "5 bytes follow the last tensor", "damaged"});
}

TEST(SafetensorsCorrupt, EntryWithoutOffsets) {
  TempDir dir;
  const std::string path = dir.file("e.safetensors");
  write_raw(path, R"({"w":{"dtype":"F32","shape":[1]}})", 4);
  expect_error([&] { SafetensorsFile f(path); }, Err::SafetensorsHeader, {path, "'w'"});
}

TEST(Safetensors, RequireFloatWeightRejectsIntegerTypes) {
  TensorInfo t{
      "model.layers.0.self_attn.q_proj.qweight", DType::I32, {8, 8}, 256, "/m/x.safetensors"};
  expect_error([&] { require_float_weight(t); }, Err::DTypeUnsupported,
               {"model.layers.0.self_attn.q_proj.qweight", "/m/x.safetensors", "I32"});
  for (DType ok : {DType::F32, DType::F16, DType::BF16}) {
    t.dtype = ok;
    EXPECT_NO_THROW(require_float_weight(t));
  }
}

TEST(Safetensors, MissingFileUsesTheGivenCode) {
  TempDir dir;
  expect_error([&] { SafetensorsFile f(dir.file("none.safetensors"), Err::ShardMissing); },
               Err::ShardMissing, {"none.safetensors"});
}

}  // namespace
}  // namespace qmpi
