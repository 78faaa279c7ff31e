#include "backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernel_test_util.h"
#include "kernels/cpu/membw.h"
#include "kernels/cpu/reference_ops.h"

namespace qmpi {
namespace {

TEST(CpuBackend, AllocatesAlignedHostBuffers) {
  std::unique_ptr<Backend> be = make_cpu_backend({});
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_TRUE(be->host_memory());
  for (size_t bytes : {size_t(0), size_t(1), size_t(100), size_t(1) << 20}) {
    Buffer b = be->alloc(bytes);
    ASSERT_TRUE(b);
    EXPECT_EQ(b.bytes(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes;
  }
  Buffer b = be->alloc(16);
  const char src[16] = "fifteen chars..";
  be->copy_to_device(b.data(), src, 16);
  char back[16];
  be->copy_to_host(back, b.data(), 16);
  EXPECT_EQ(std::memcmp(src, back, 16), 0);
  be->fill_zero(b.data(), 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b.as<char>()[i], 0);
}

TEST(CpuBackend, MakeWeightFillsItsOwnStorage) {
  CpuBackend be;
  void* seen = nullptr;
  Weight w = be.make_weight(DType::BF16, 3, 5, [&](void* dst) {
    seen = dst;
    std::memset(dst, 0, 3 * 5 * 2);
  });
  EXPECT_EQ(seen, w.storage.data());
  EXPECT_EQ(w.storage.bytes(), 30u);
  const WeightView v = w.view();
  EXPECT_EQ(v.data, w.storage.data());
  EXPECT_EQ(v.dtype, DType::BF16);
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.cols, 5);
}

// The option reaches the matmul: exact by default, bf16-rounded activations when asked.
TEST(CpuBackend, Bf16ActivationOptionSelectsThePath) {
  std::mt19937 rng(31);
  const int64_t n = 40, N = 24, K = 96;
  test::HostWeight w = test::random_weight(DType::BF16, N, K, rng);
  std::vector<float> x = test::random_floats(size_t(n * K), rng), xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
  std::vector<float> exact(size_t(n * N)), rounded(exact.size()), got(exact.size());
  cpu::ref::matmul(x.data(), n, w.view(), nullptr, exact.data());
  cpu::ref::matmul(xr.data(), n, w.view(), nullptr, rounded.data());
  for (int64_t rows : {int64_t(2), n}) {  // decode and prefill paths
    CpuBackend plain({2, false}), fast({2, true});
    plain.matmul(x.data(), rows, w.view(), nullptr, got.data());
    EXPECT_LT(test::max_rel_err(got.data(), exact.data(), size_t(rows * N)), 1e-5);
    fast.matmul(x.data(), rows, w.view(), nullptr, got.data());
    EXPECT_LT(test::max_rel_err(got.data(), rounded.data(), size_t(rows * N)), 1e-5);
    EXPECT_GT(test::max_rel_err(got.data(), exact.data(), size_t(rows * N)), 1e-5);
  }
}

TEST(CpuBackend, RopeFollowsFrequencyAttentionAndHeadDimChanges) {
  CpuBackend be({1, false});
  std::mt19937 rng(32);
  const int32_t pos[2] = {3, 9};
  const std::vector<float> a{1.0f, 0.1f, 0.01f, 0.001f, 1e-4f, 1e-5f, 1e-6f, 1e-7f};
  std::vector<float> b = a;
  b[3] = 0.5f;
  // Same head_dim and pointer with new contents, a new attention factor, per-token rows.
  for (auto [f, label] : {std::pair<RopeFreqs, const char*>{{a.data(), 1, 8, 1.0f}, "a"},
                          {{b.data(), 1, 8, 1.0f}, "b"},
                          {{b.data(), 1, 8, 1.2f}, "b x1.2"},
                          {{a.data(), 1, 16, 1.0f}, "a d16"},
                          {{a.data(), 2, 8, 1.0f}, "rows"}}) {
    std::vector<float> x = test::random_floats(size_t(2 * 2 * f.head_dim), rng), want = x;
    cpu::ref::rope(want.data(), 2, 2, pos, f);
    be.rope(x.data(), 2, 2, pos, f);
    EXPECT_LT(test::max_rel_err(x, want), 1e-5) << label;
  }
}

// MoE experts side by side: every task runs once, and a matmul inside a task (on its one
// thread) gives the same bits as the same matmul split over the threads outside.
TEST(CpuBackend, RunTasksRunsEachTaskOnceWithKernelsOnItsThread) {
  std::mt19937 rng(33);
  const int64_t tasks = 9, N = 67, K = 130;
  std::vector<test::HostWeight> ws;
  std::vector<std::vector<float>> xs;
  for (int64_t i = 0; i < tasks; ++i) {
    ws.push_back(test::random_weight(DType::BF16, N, K, rng));
    xs.push_back(test::random_floats(size_t((i + 1) * K), rng));
  }
  for (bool bf16 : {false, true}) {
    CpuBackend be({2, bf16});
    std::vector<std::vector<float>> alone(static_cast<size_t>(tasks)), side(alone);
    std::vector<int> runs(size_t(tasks), 0);
    for (int64_t i = 0; i < tasks; ++i) {
      alone[size_t(i)].resize(size_t((i + 1) * N));
      side[size_t(i)].resize(size_t((i + 1) * N));
      be.matmul(xs[size_t(i)].data(), i + 1, ws[size_t(i)].view(), nullptr,
                alone[size_t(i)].data());
    }
    be.run_tasks(tasks, [&](int64_t i) {
      ++runs[size_t(i)];
      be.matmul(xs[size_t(i)].data(), i + 1, ws[size_t(i)].view(), nullptr, side[size_t(i)].data());
    });
    for (int64_t i = 0; i < tasks; ++i) {
      EXPECT_EQ(runs[size_t(i)], 1) << i;
      EXPECT_EQ(side[size_t(i)], alone[size_t(i)]) << "task " << i << " bf16 " << bf16;
    }
  }
}

TEST(Membw, MeasuresAPositiveReadBandwidth) {
  const double bw = cpu::read_bandwidth({size_t(16) << 20, 2, 2});
  EXPECT_GT(bw, 1e8);  // any machine reads more than 100 MB/s
  EXPECT_LT(bw, 1e13);
}

}  // namespace
}  // namespace qmpi
