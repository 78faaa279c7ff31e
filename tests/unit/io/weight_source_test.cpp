#include "io/weight_source.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"
#include "core/errors.h"
#include "io/safetensors_writer.h"

namespace qmpi {
namespace {

using testing::TempDir;

Err code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return Err::Usage;  // "no error": no test below expects Usage
}

TEST(SliceNumel, CountsAndValidates) {
  EXPECT_EQ(slice_numel({4, 6}, Slice::whole()), 24);
  EXPECT_EQ(slice_numel({4, 6}, {0, 1, 2}), 12);
  EXPECT_EQ(slice_numel({4, 6}, {1, 2, 3}), 12);
  EXPECT_EQ(slice_numel({4, 6}, {1, 6, 0}), 0);
  EXPECT_EQ(slice_numel({7}, {0, 3, 4}), 4);
  EXPECT_EQ(slice_numel({}, Slice::whole()), 1);
  EXPECT_EQ(code_of([] { slice_numel({4, 6}, {2, 0, 1}); }), Err::Internal);
  EXPECT_EQ(code_of([] { slice_numel({4, 6}, {1, 4, 3}); }), Err::Internal);
  EXPECT_EQ(code_of([] { slice_numel({4, 6}, {0, -1, 2}); }), Err::Internal);
  EXPECT_EQ(code_of([] { slice_numel({4, 6}, {0, 1, -1}); }), Err::Internal);
}

TEST(OpenWeightSource, DispatchesOnPath) {
  TempDir dir;
  EXPECT_EQ(code_of([&] { open_weight_source(dir.file("absent")); }), Err::ModelDirMissing);
  // .h5 paths go to the HDF5 reader (tests/unit/io/h5_checkpoint_test.cpp).
  EXPECT_EQ(code_of([&] { open_weight_source(dir.file("model.h5")); }), Err::ModelDirMissing);
  std::ofstream(dir.file("text.h5")) << "x";
  EXPECT_EQ(code_of([&] { open_weight_source(dir.file("text.h5")); }), Err::H5Format);
  std::ofstream(dir.file("file.bin")) << "x";
  EXPECT_EQ(code_of([&] { open_weight_source(dir.file("file.bin")); }), Err::ModelDirMissing);

  SafetensorsWriter w;
  w.add("t", DType::F32, {2}, [](int64_t, int64_t n, void* dst) {
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = 3.0f;
  });
  w.write(dir.file("model.safetensors"));
  auto src = open_weight_source(dir.str());
  float out[2] = {};
  src->read("t", Slice::whole(), out);
  EXPECT_EQ(out[1], 3.0f);
}

}  // namespace
}  // namespace qmpi
