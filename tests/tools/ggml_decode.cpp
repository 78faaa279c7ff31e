// The engine's GGUF block decoder on stdin's blocks: `qmpi_ggml_decode TYPE < blocks > float32`,
// for tests/reference/ggml_blocks.py to check against its own NumPy decoder. With `--int8-gemv
// ROWS COLS N`, stdin is a ROWS x COLS weight of TYPE followed by N x COLS float32 activations,
// and stdout the N x ROWS products of the int8-activation GEMV (matmul_ggml_int8.cpp).
// Exit code 3: this build has no int8 dot products (dot_products.h), so there is no such GEMV.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/matmul_ggml.h"

namespace {

using namespace qmpi;

int int8_gemv(const GgmlTypeInfo& type, int64_t rows, int64_t cols, int64_t n,
              const std::vector<uint8_t>& in) {
  const int64_t row_bytes = ggml_bytes(type, cols), weight_bytes = rows * row_bytes;
  if (cols % type.block_elems != 0 ||
      int64_t(in.size()) != weight_bytes + n * cols * int64_t(sizeof(float))) {
    std::cerr << in.size() << " bytes are not a " << rows << " x " << cols << " " << type.name
              << " weight and " << n << " rows of float32\n";
    return 1;
  }
  const GgmlWeightView w{in.data(), type.type, rows, cols, row_bytes};
  std::vector<float> x(size_t(n * cols)), out(size_t(n * rows));
  std::copy(in.begin() + weight_bytes, in.end(), reinterpret_cast<uint8_t*>(x.data()));
  if (!cpu::matmul_ggml_gemv_int8(x.data(), n, w, nullptr, out.data(), {1, true})) {
    std::cerr << "no int8 GEMV for " << type.name << " rows of " << cols << " in this build ("
              << cpu::dot_products_summary() << ")\n";
    return cpu::kHaveInt8Dot ? 1 : 3;  // 3: the build has no int8 dot products at all
  }
  std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const GgmlTypeInfo* type = nullptr;
  const bool gemv = argc == 6 && std::string_view(argv[2]) == "--int8-gemv";
  for (uint32_t id = 0; (argc == 2 || gemv) && id < 64 && !type; ++id) {
    const GgmlTypeInfo* t = ggml_type_info(id);
    if (t && t->weights && t->name == std::string_view(argv[1])) type = t;
  }
  if (!type) {
    std::cerr << "usage: qmpi_ggml_decode TYPE [--int8-gemv ROWS COLS N] < blocks (TYPE one of "
              << ggml_weight_type_names() << ")\n";
    return 2;
  }
  const std::vector<uint8_t> in{std::istreambuf_iterator<char>(std::cin), {}};
  if (gemv)
    return int8_gemv(*type, std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]), in);
  if (in.size() % size_t(type->block_bytes) != 0) {
    std::cerr << in.size() << " bytes are not whole " << type->name << " blocks\n";
    return 1;
  }
  const int64_t n = int64_t(in.size()) / type->block_bytes * type->block_elems;
  std::vector<float> out(static_cast<size_t>(n));
  cpu::dequantize_ggml_row(type->type, in.data(), out.data(), n);
  std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}
