// The CUDA int4 matmul against the CPU backend's, on the same repacked weight: the GEMV
// (dequantize-in-the-loop, float32) for decode and dequantization to bf16 + cuBLAS for prefill,
// in input order and with act-order runs (x_index). Skips without a GPU (bench/gpu_check.sh
// runs it on one).
#include <numeric>

#include "device_check.h"
#include "model/int4_weight.h"

namespace qmpi::test {
namespace {

class CudaInt4 : public DeviceCheck {
 protected:
  // A random slice of an int4 projection; with `act_order`, inputs get groups in random order.
  Int4Unpacked unpacked(int64_t rows, int64_t inputs, int64_t group, bool act_order) {
    Int4Unpacked u;
    u.rows = rows;
    u.inputs = inputs;
    u.groups = (inputs + group - 1) / group;
    u.q.resize(size_t(inputs * rows));
    for (auto& q : u.q) q = uint8_t(random_int(0, 15));
    u.zero.resize(size_t(u.groups * rows));
    for (auto& z : u.zero) z = uint8_t(random_int(0, 16));
    u.scale.resize(size_t(u.groups * rows));
    for (auto& s : u.scale) s = f32_to_f16(random(1, 0.002f, 0.02f)[0]);
    u.group_of.resize(size_t(inputs));
    std::vector<int64_t> order(static_cast<size_t>(inputs));
    std::iota(order.begin(), order.end(), int64_t{0});
    if (act_order) std::shuffle(order.begin(), order.end(), rng_);
    for (int64_t i = 0; i < inputs; ++i) u.group_of[order[i]] = int32_t(i / group);
    return u;
  }
};

TEST_F(CudaInt4, GemvAndDequantizedGemmMatchTheCpu) {
  struct Case {
    int64_t rows, inputs, group;
    bool act_order;
  };
  for (Case c : {Case{896, 896, 128, false}, Case{300, 4864, 128, false}, Case{136, 200, 32, true},
                 Case{64, 896, 896, true}}) {
    const Int4Host h = repack_int4(unpacked(c.rows, c.inputs, c.group, c.act_order));
    const Int4Weight wc = upload_int4(*cpu_, h), wg = upload_int4(*gpu_, h);
    WeightPair b = weight(DType::F16, 1, c.rows, -1.0f, 1.0f);
    const WeightView bc = b.cpu.view(), bg = b.gpu.view();
    for (int64_t n : {1, 5, 8, 40}) {
      const std::vector<float> x = random(size_t(n * c.inputs), -2.0f, 2.0f);
      std::vector<float> want(size_t(n * c.rows));
      cpu_->matmul_int4(x.data(), n, wc.view(), &bc, want.data());
      Buffer dx = to_gpu(x), out = poisoned(want.size());
      gpu_->matmul_int4(dx.as<float>(), n, wg.view(), &bg, out.as<float>());
      const std::string what = "int4 " + std::to_string(n) + "x" + std::to_string(c.inputs) +
                               " . " + std::to_string(c.rows) + "^T g" + std::to_string(c.group) +
                               (c.act_order ? " act-order" : "");
      // n <= 8: float32 GEMV; beyond: bf16 weights and inputs on the tensor cores.
      expect_close(from_gpu(out, want.size()), want, n <= 8 ? 1e-5 : 1e-2, what);
    }
  }
}

}  // namespace
}  // namespace qmpi::test
