#include "io/h5_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../expect_error.h"
#include "../temp_dir.h"
#include "core/errors.h"
#include "io/checkpoint_dir.h"
#include "io/h5_attr.h"
#include "io/h5_convert.h"
#include "io/safetensors_writer.h"

namespace qmpi {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

constexpr int64_t kHeadDim = 4;
const char* const kQ = "model.layers.0.self_attn.q_proj.weight";  // [12, 8] bf16, 3 heads
const char* const kO = "model.layers.0.self_attn.o_proj.weight";  // [8, 12] bf16
const char* const kDown = "model.layers.0.mlp.down_proj.weight";  // [8, 18] f32
const char* const kEmbed = "model.embed_tokens.weight";           // [50, 8] f32
const char* const kNorm = "model.norm.weight";                    // [8] f32

using testing::expect_error;

void add(SafetensorsWriter& w, const std::string& name, DType dtype, std::vector<int64_t> shape,
         int salt) {
  w.add(name, dtype, std::move(shape), [=](int64_t first, int64_t count, void* dst) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = float((first + i) % 200 + salt) * 0.5f;  // exact in bf16
      if (dtype == DType::F32)
        static_cast<float*>(dst)[i] = v;
      else
        static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v);
    }
  });
}

// A small Qwen-named checkpoint, converted to model.h5 beside it.
struct Fixture {
  TempDir dir;
  std::string h5 = dir.file("model.h5");
  std::unique_ptr<SafetensorsDir> src;

  explicit Fixture(std::optional<DType> dtype = std::nullopt) {
    SafetensorsWriter w;
    add(w, kEmbed, DType::F32, {50, 8}, 1);
    add(w, kQ, DType::BF16, {12, 8}, 2);
    add(w, kO, DType::BF16, {8, 12}, 3);
    add(w, kDown, DType::F32, {8, 18}, 4);
    add(w, kNorm, DType::F32, {8}, 5);
    w.write(dir.file("model.safetensors"));
    src = std::make_unique<SafetensorsDir>(dir.str());
    H5ConvertOptions o;
    o.dtype = dtype;
    o.head_dim = kHeadDim;
    o.meta = {{"config.json", "{\"hidden_size\": 8}"}, {"tokenizer.json", "{}"}};
    convert_to_h5(*src, h5, o);
  }
};

std::vector<uint8_t> read_bytes(WeightSource& s, const std::string& name, const Slice& slice) {
  const TensorInfo& t = s.info(name);
  std::vector<uint8_t> out(size_t(slice_numel(t.shape, slice)) * dtype_size(t.dtype));
  s.read(name, slice, out.data());
  return out;
}

// Every slice shape the shard plan asks for, plus ones that cut chunks in the middle.
const std::vector<std::pair<const char*, Slice>> kSlices = {
    {kEmbed, Slice::whole()}, {kEmbed, {0, 0, 25}}, {kEmbed, {0, 10, 27}}, {kEmbed, {0, 49, 1}},
    {kQ, Slice::whole()},     {kQ, {0, 4, 8}},      {kQ, {0, 2, 5}},       {kO, {1, 4, 4}},
    {kO, {1, 3, 6}},          {kDown, {1, 9, 9}},   {kDown, {1, 0, 18}},   {kNorm, Slice::whole()},
};

void expect_same_reads(H5Weights& h5, SafetensorsDir& st) {
  for (const auto& [name, slice] : kSlices)
    EXPECT_EQ(read_bytes(h5, name, slice), read_bytes(st, name, slice))
        << name << " dim " << slice.dim << " [" << slice.start << ", +" << slice.length << ")";
}

TEST(H5Checkpoint, RoundTripKeepsEveryByteAndTheOrder) {
  Fixture f;
  H5Weights h5(f.h5);
  EXPECT_EQ(h5.names(), f.src->names());
  for (const auto& name : f.src->names()) {
    EXPECT_EQ(h5.info(name).shape, f.src->info(name).shape) << name;
    EXPECT_EQ(h5.info(name).dtype, f.src->info(name).dtype) << name;
    EXPECT_EQ(h5.info(name).nbytes, f.src->info(name).nbytes) << name;
    EXPECT_EQ(h5.info(name).file, f.h5);
  }
  expect_same_reads(h5, *f.src);
  uint64_t want = 0;
  for (const auto& [name, slice] : kSlices)
    want +=
        uint64_t(slice_numel(f.src->info(name).shape, slice)) * dtype_size(f.src->info(name).dtype);
  EXPECT_EQ(h5.bytes_read(), want);  // exactly the slices, nothing more
  EXPECT_FALSE(fs::exists(f.h5 + ".partial"));
}

TEST(H5Checkpoint, VerifyAcceptsAnIntactFileAndReadsWholeChunksOnlyWhenCut) {
  Fixture f;
  H5Weights h5(f.h5, H5ReadOptions{true});
  expect_same_reads(h5, *f.src);
  H5Weights aligned(f.h5, H5ReadOptions{true});
  read_bytes(aligned, kQ, {0, 4, 8});  // chunks of one head (4 rows): nothing extra to read
  EXPECT_EQ(aligned.bytes_read(), 8u * 8 * 2);
  read_bytes(aligned, kEmbed, {0, 10, 27});  // cuts chunks [0, 25) and [25, 50): both read whole
  EXPECT_EQ(aligned.bytes_read(), 8u * 8 * 2 + 50 * 8 * 4);
}

TEST(H5Checkpoint, CastsFloatTensors) {
  Fixture to_f32(DType::F32);
  H5Weights h5(to_f32.h5);
  EXPECT_EQ(h5.info(kQ).dtype, DType::F32);
  const auto got = read_bytes(h5, kQ, Slice::whole());
  const auto want = read_bytes(*to_f32.src, kQ, Slice::whole());
  for (size_t i = 0; i < want.size() / 2; ++i) {
    uint16_t b;
    float f;
    std::memcpy(&b, want.data() + 2 * i, 2);
    std::memcpy(&f, got.data() + 4 * i, 4);
    ASSERT_EQ(f, bf16_to_f32(b)) << i;
  }
  Fixture to_bf16(DType::BF16);
  H5Weights h5b(to_bf16.h5, H5ReadOptions{true});
  EXPECT_EQ(h5b.info(kEmbed).dtype, DType::BF16);
  const auto e = read_bytes(h5b, kEmbed, {0, 3, 1});
  uint16_t b;
  std::memcpy(&b, e.data() + 2, 2);  // element (3, 1): flat 25
  EXPECT_EQ(bf16_to_f32(b), float(25 % 200 + 1) * 0.5f);
}

TEST(H5Checkpoint, StoresMetaFiles) {
  Fixture f;
  EXPECT_EQ(read_h5_meta(f.h5, "config.json"), "{\"hidden_size\": 8}");
  EXPECT_EQ(read_h5_meta(f.h5, "tokenizer.json"), "{}");
  EXPECT_EQ(read_h5_meta(f.h5, "generation_config.json"), std::nullopt);
  EXPECT_TRUE(is_h5_path(f.h5));
  EXPECT_FALSE(is_h5_path(f.dir.str()));
  EXPECT_FALSE(is_h5_path(f.dir.file("model.safetensors")));
  const std::string renamed = f.dir.file("model.bin");  // detected by its signature
  fs::copy_file(f.h5, renamed);
  EXPECT_TRUE(is_h5_path(renamed));
  EXPECT_TRUE(open_weight_source(renamed)->has(kNorm));
}

// The file offset of chunk `index` of a tensor, as H5Dget_chunk_info reports it.
haddr_t chunk_offset(const std::string& path, const std::string& name, hsize_t index) {
  H5File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Dataset ds(H5Dopen2(f.get(), ("/weights/" + name).c_str(), H5P_DEFAULT));
  hsize_t coords[2];
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  H5Space space(H5Dget_space(ds.get()));
  if (H5Dget_chunk_info(ds.get(), space.get(), index, coords, &mask, &addr, &size) < 0 || addr == 0)
    throw std::runtime_error("no chunk " + std::to_string(index) + " in " + name);
  return addr;
}

void flip_byte(const std::string& path, haddr_t offset) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(std::streamoff(offset));
  char c = 0;
  io.read(&c, 1);
  c = char(c ^ 0x5A);
  io.seekp(std::streamoff(offset));
  io.write(&c, 1);
}

TEST(H5Checkpoint, VerifyNamesTheTensorAndChunkOfACorruptByte) {
  Fixture f;
  flip_byte(f.h5, chunk_offset(f.h5, kO, 1) + 3);  // o_proj columns [4, 8)
  H5Weights plain(f.h5);
  EXPECT_NE(read_bytes(plain, kO, Slice::whole()), read_bytes(*f.src, kO, Slice::whole()));
  H5Weights checked(f.h5, H5ReadOptions{true});
  EXPECT_EQ(read_bytes(checked, kO, {1, 0, 4}), read_bytes(*f.src, kO, {1, 0, 4}));  // chunk 0
  expect_error(
      [&] {
        read_bytes(checked, kO, {1, 4, 4});
      },
      Err::ChecksumMismatch, {kO, "chunk 1", "[0:8, 4:8]"});
  expect_error([&] { read_bytes(checked, kO, {1, 2, 4}); }, Err::ChecksumMismatch, {kO});
}

// Rewrites part of a converted file with the HDF5 API.
template <class Fn>
void edit(const std::string& path, Fn fn) {
  H5File f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(bool(f));
  fn(f.get());
}

TEST(H5Checkpoint, BadFilesRaiseCatalogueErrorsNamingTheProblem) {
  Fixture f;
  expect_error([&] { H5Weights w(f.dir.file("absent.h5")); }, Err::ModelDirMissing, {"absent.h5"});

  std::ofstream(f.dir.file("text.h5")) << "not hdf5 at all";
  expect_error([&] { H5Weights w(f.dir.file("text.h5")); }, Err::H5Format,
               {"text.h5", "not an HDF5 file"});

  const std::string cut = f.dir.file("cut.h5");
  fs::copy_file(f.h5, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  expect_error([&] { H5Weights w(cut); }, Err::H5Format, {"cut.h5", "truncated file: eof"});

  const std::string v2 = f.dir.file("v2.h5");
  fs::copy_file(f.h5, v2);
  edit(v2, [&](hid_t file) { write_int_attr(file, kH5VersionAttr, 2, v2); });
  expect_error([&] { H5Weights w(v2); }, Err::H5Format,
               {"qmpi_format_version 2", "reads version 1"});

  const std::string nover = f.dir.file("nover.h5");
  fs::copy_file(f.h5, nover);
  edit(nover, [](hid_t file) { H5Adelete(file, kH5VersionAttr); });
  expect_error([&] { H5Weights w(nover); }, Err::H5Format, {"not a qmpi checkpoint"});

  const std::string missing = f.dir.file("missing.h5");
  fs::copy_file(f.h5, missing);
  edit(missing, [](hid_t file) { H5Ldelete(file, "/weights/model.norm.weight", H5P_DEFAULT); });
  H5Weights m(missing);
  EXPECT_FALSE(m.has(kNorm));
  expect_error([&] { m.info(kNorm); }, Err::TensorMissing, {kNorm, "missing.h5"});

  const std::string nodtype = f.dir.file("nodtype.h5");
  fs::copy_file(f.h5, nodtype);
  edit(nodtype, [](hid_t file) {
    H5Dataset ds(H5Dopen2(file, (std::string("/weights/") + kQ).c_str(), H5P_DEFAULT));
    H5Adelete(ds.get(), kH5DtypeAttr);
  });
  expect_error([&] { H5Weights w(nodtype); }, Err::H5Format, {kQ, "no dtype attribute"});

  const std::string wrongtype = f.dir.file("wrongtype.h5");
  fs::copy_file(f.h5, wrongtype);
  edit(wrongtype, [&](hid_t file) {
    H5Dataset ds(H5Dopen2(file, (std::string("/weights/") + kQ).c_str(), H5P_DEFAULT));
    write_string_attr(ds.get(), kH5DtypeAttr, "F32", wrongtype);
  });
  expect_error([&] { H5Weights w(wrongtype); }, Err::H5Format, {kQ, "says dtype F32"});

  const std::string nocrc = f.dir.file("nocrc.h5");
  fs::copy_file(f.h5, nocrc);
  edit(nocrc, [](hid_t file) {
    H5Dataset ds(H5Dopen2(file, (std::string("/weights/") + kNorm).c_str(), H5P_DEFAULT));
    H5Adelete(ds.get(), kH5ChunkCrcAttr);
  });
  H5Weights unchecked(nocrc);
  EXPECT_EQ(read_bytes(unchecked, kNorm, Slice::whole()).size(), 32u);
  H5Weights checked(nocrc, H5ReadOptions{true});
  expect_error([&] { read_bytes(checked, kNorm, Slice::whole()); }, Err::H5Format,
               {kNorm, "chunk_crc32"});
}

}  // namespace
}  // namespace qmpi
