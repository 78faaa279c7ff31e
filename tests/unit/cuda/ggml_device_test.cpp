// The CUDA GGUF matmul against the CPU backend's on the same blocks, for every weight type: the
// GEMV (decoded in registers, float32) for decode and dequantization to bf16 + cuBLAS for
// prefill, with a bias. Skips without a GPU (bench/gpu_check.sh runs it on one).
#include "device_check.h"
#include "tests/unit/kernels/ggml_test_util.h"

namespace qmpi::test {
namespace {

class CudaGgml : public DeviceCheck {};

TEST_F(CudaGgml, GemvAndDequantizedGemmMatchTheCpu) {
  for (GgmlType t : kGgmlTypes) {
    const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t));
    const int64_t rows = 300, cols = info.block_elems == 256 ? 4 * 256 : 28 * 32;
    const HostGgml h = random_ggml(t, rows, cols, rng_);
    Buffer dw = gpu_->alloc(h.bytes.size());
    gpu_->copy_to_device(dw.data(), h.bytes.data(), h.bytes.size());
    GgmlWeightView wg = h.v;
    wg.data = static_cast<const uint8_t*>(dw.data());
    WeightPair b = weight(DType::F16, 1, rows, -1.0f, 1.0f);
    const WeightView bc = b.cpu.view(), bg = b.gpu.view();
    for (int64_t n : {1, 5, 8, 40}) {
      const std::vector<float> x = random(size_t(n * cols), -2.0f, 2.0f);
      std::vector<float> want(size_t(n * rows));
      cpu_->matmul_ggml(x.data(), n, h.v, &bc, want.data());
      Buffer dx = to_gpu(x), out = poisoned(want.size());
      gpu_->matmul_ggml(dx.as<float>(), n, wg, &bg, out.as<float>());
      const std::string what = std::string(info.name) + " " + std::to_string(n) + "x" +
                               std::to_string(cols) + " . " + std::to_string(rows) + "^T";
      // n <= 8: float32 GEMV; beyond: bf16 weights and inputs on the tensor cores.
      expect_close(from_gpu(out, want.size()), want, n <= 8 ? 1e-5 : 1e-2, what);
    }
  }
}

}  // namespace
}  // namespace qmpi::test
