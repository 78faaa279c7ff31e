// Side-by-side device timings of the kernels that replaced a plainer path, each checked first
// against that path on the same inputs (needs a GPU; see device_check.h). No bound on the
// times: each test prints a `kernel_time ...` line that bench/gpu_check.sh turns into a row.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cuda_handles.h"
#include "device_check.h"
#include "kernels/cuda/launch_shapes.h"

namespace qmpi::test {
namespace {

constexpr int kRepeats = 20;

class CudaTiming : public DeviceCheck {
 protected:
  // Microseconds per call of f on `be`'s stream, over kRepeats calls after one warm-up.
  static double us_per_call(CudaBackend& be, const std::function<void()>& f) {
    f();
    cuda::CudaEvent start(true), stop(true);
    start.record(be.stream());
    for (int i = 0; i < kRepeats; ++i) f();
    stop.record(be.stream());
    stop.synchronize();
    return 1000.0 * double(stop.ms_since(start)) / kRepeats;
  }
};

// One decode row of a qwen2.5-0.5b-shaped layer (14 query heads over 2 KV heads of dim 64, bf16
// KV) at a long context: the single-pass kernel walks all keys in 14 blocks, the split one in
// chunks over the whole GPU.
TEST_F(CudaTiming, SplitDecodeAttentionAgainstSinglePass) {
  const int32_t heads = 14, kv_heads = 2, dim = 64, block = 16;
  for (int32_t ctx : {4096, 16384}) {
    const int32_t blocks = ctx / block;
    const int64_t vectors = int64_t(blocks) * block * kv_heads;
    Buffer k = gpu_->alloc(size_t(vectors * dim) * 2), v = gpu_->alloc(size_t(vectors * dim) * 2);
    const KvLayerView kv{k.data(), v.data(), blocks, block, kv_heads, dim, DType::BF16};
    std::vector<int32_t> slots(size_t(blocks) * block);
    std::iota(slots.begin(), slots.end(), 0);
    Buffer nk = to_gpu(random(size_t(vectors * dim))), nv = to_gpu(random(size_t(vectors * dim)));
    gpu_->kv_store(nk.as<float>(), nv.as<float>(), int64_t(slots.size()), slots.data(), kv);

    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    const AttentionSeq seq{0, 1, ctx, 0};
    const AttentionBatch b{&seq, 1, table.data(), heads, kv_heads, dim, 0.125f};
    Buffer q = to_gpu(random(size_t(heads * dim), -3.0f, 3.0f));
    Buffer split_out = poisoned(size_t(heads * dim)), single_out = poisoned(size_t(heads * dim));

    CudaBackend single(CudaBackendOptions{.split_attention = false});
    gpu_->synchronize();  // the cache was written on gpu_'s stream
    const auto run_split = [&] { gpu_->attention(q.as<float>(), b, kv, split_out.as<float>()); };
    const auto run_single = [&] { single.attention(q.as<float>(), b, kv, single_out.as<float>()); };
    const double t_split = us_per_call(*gpu_, run_split);
    const double t_single = us_per_call(single, run_single);
    single.synchronize();
    const std::vector<float> want = from_gpu(single_out, size_t(heads * dim));
    expect_close(from_gpu(split_out, want.size()), want, 1e-5,
                 "split vs single-pass, context " + std::to_string(ctx));
    const cuda::AttentionSplit s =
        cuda::attention_split(1, heads, ctx, gpu_->device().multiprocessors);
    EXPECT_GT(s.chunks, 1) << "the timing would compare the single-pass kernel with itself";
    std::printf(
        "kernel_time decode attention ctx %d: single-pass %.1f us, split (%d chunks) "
        "%.1f us (14/2 heads, dim 64, bf16 KV)\n",
        ctx, t_single, s.chunks, t_split);
  }
}

// The residual add and the following norm over a prefill's rows of qwen2.5-0.5b's width:
// fused, x is read once and written once instead of read twice and written once more.
TEST_F(CudaTiming, FusedAddRmsNormAgainstAddThenNorm) {
  const int64_t n = 512, width = 896;
  WeightPair w = weight(DType::BF16, 1, width, 0.5f, 1.5f);
  const std::vector<float> x = random(size_t(n * width), -3.0f, 3.0f);
  Buffer y = to_gpu(random(x.size())), out = poisoned(x.size()), ref = poisoned(x.size());
  Buffer x_fused = to_gpu(x), x_apart = to_gpu(x);
  // Each timed call adds y again: x grows over the calls, the same in both paths.
  const auto fused = [&] {
    gpu_->add_rmsnorm(x_fused.as<float>(), y.as<float>(), n, w.gpu.view(), 1e-6f, out.as<float>(),
                      {});
  };
  const auto apart = [&] {
    gpu_->add(x_apart.as<float>(), y.as<float>(), n * width);
    gpu_->rmsnorm(x_apart.as<float>(), n, w.gpu.view(), 1e-6f, ref.as<float>(), {});
  };
  const double t_fused = us_per_call(*gpu_, fused);
  const double t_apart = us_per_call(*gpu_, apart);
  EXPECT_EQ(mismatches(from_gpu(x_fused, x.size()), from_gpu(x_apart, x.size())), 0u);
  expect_close(from_gpu(out, x.size()), from_gpu(ref, x.size()), 1e-5, "fused vs add + rmsnorm");
  std::printf("kernel_time add+rmsnorm %ldx%ld: separate %.1f us, fused %.1f us\n", long(n),
              long(width), t_apart, t_fused);
}

// The norm and the q/k/v GEMMs that read it, at qwen2.5-0.5b's width: given a bf16 view, the
// norm writes the GEMM input's bf16 copy itself and the group multiplies it; without one, the
// group converts x first.
TEST_F(CudaTiming, Bf16CopyAgainstConvertingPath) {
  const int64_t width = 896;
  WeightPair norm = weight(DType::BF16, 1, width, 0.5f, 1.5f);
  WeightPair q = weight(DType::BF16, 896, width, -1.0f, 1.0f),
             k = weight(DType::BF16, 128, width, -1.0f, 1.0f),
             v = weight(DType::BF16, 128, width, -1.0f, 1.0f);
  for (int64_t n : {int64_t(1), int64_t(512)}) {
    Buffer x = to_gpu(random(size_t(n * width), -3.0f, 3.0f)), xn = poisoned(size_t(n * width));
    Buffer xn16 = gpu_->alloc(size_t(n * width) * 2);
    std::vector<Buffer> outs;
    for (int i = 0; i < 6; ++i) outs.push_back(poisoned(size_t(n * 896)));
    auto chain = [&](bool copy, int first) {
      const ActivationView r =
          copy ? ActivationView{xn16.data(), DType::BF16, n, width} : ActivationView{};
      gpu_->rmsnorm(x.as<float>(), n, norm.gpu.view(), 1e-6f, xn.as<float>(), r);
      const MatmulTarget group[] = {{q.gpu.view(), nullptr, outs[size_t(first)].as<float>()},
                                    {k.gpu.view(), nullptr, outs[size_t(first + 1)].as<float>()},
                                    {v.gpu.view(), nullptr, outs[size_t(first + 2)].as<float>()}};
      gpu_->matmul_group({xn.as<float>(), r}, n, group);
    };
    const double t_plain = us_per_call(*gpu_, [&] { chain(false, 3); });
    const double t_copy = us_per_call(*gpu_, [&] { chain(true, 0); });
    for (int i = 0; i < 3; ++i) {
      const size_t count = size_t(n * (i == 0 ? 896 : 128));
      EXPECT_EQ(mismatches(from_gpu(outs[size_t(i)], count), from_gpu(outs[size_t(i + 3)], count)),
                0u)
          << "target " << i << ", " << n << " rows";
    }
    std::printf(
        "kernel_time rmsnorm+qkv %ldx%ld: converting %.1f us, bf16 copy from the norm %.1f us "
        "(896+128+128 bf16 rows)\n",
        long(n), long(width), t_plain, t_copy);
  }
}

}  // namespace
}  // namespace qmpi::test
