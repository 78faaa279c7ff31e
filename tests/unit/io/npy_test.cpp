#include "io/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir.h"
#include "core/errors.h"

namespace qmpi {
namespace {

TEST(Npy, RoundTripAndHeaderLayout) {
  testing::TempDir dir;
  std::vector<float> v(3 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.25f - 1.0f;
  const std::string path = dir.file("a.npy");
  write_npy_f32(path, v.data(), 3, 5);
  // NumPy requires the data to start at a multiple of 64 (NEP 1, format 1.0).
  EXPECT_EQ((std::filesystem::file_size(path) - v.size() * 4) % 64, 0u);
  std::ifstream in(path, std::ios::binary);
  std::string head(10, '\0');
  in.read(head.data(), 10);
  EXPECT_EQ(head.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(head[6], 1);
  const NpyArray a = read_npy_f32(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(a.data, v);
}

TEST(Npy, RejectsOtherFiles) {
  testing::TempDir dir;
  std::ofstream(dir.file("x.npy")) << "not numpy at all";
  EXPECT_THROW(read_npy_f32(dir.file("x.npy")), Error);
  EXPECT_THROW(read_npy_f32(dir.file("absent.npy")), Error);
}

}  // namespace
}  // namespace qmpi
