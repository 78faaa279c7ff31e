// NumPy .npy files of float32 (format 1.0, little-endian, C order): `qmpi logits` writes them and
// the tests compare them with the NumPy reference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qmpi {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Throws Error(OutputFile) when the file cannot be written.
void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);
// Reads a little-endian float32 array of any rank in C order. Throws Error(InputFile) otherwise.
NpyArray read_npy_f32(const std::string& path);

}  // namespace qmpi
