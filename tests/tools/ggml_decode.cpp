// The engine's GGUF block decoder on stdin's blocks: `qmpi_ggml_decode TYPE < blocks > float32`,
// for tests/reference/ggml_blocks.py to check against its own NumPy decoder.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"
#include "kernels/cpu/ggml_dequant.h"

int main(int argc, char** argv) {
  using namespace qmpi;
  const GgmlTypeInfo* type = nullptr;
  for (uint32_t id = 0; argc == 2 && id < 64 && !type; ++id) {
    const GgmlTypeInfo* t = ggml_type_info(id);
    if (t && t->weights && t->name == std::string_view(argv[1])) type = t;
  }
  if (!type) {
    std::cerr << "usage: qmpi_ggml_decode TYPE < blocks (TYPE one of " << ggml_weight_type_names()
              << ")\n";
    return 2;
  }
  const std::vector<uint8_t> in{std::istreambuf_iterator<char>(std::cin), {}};
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
