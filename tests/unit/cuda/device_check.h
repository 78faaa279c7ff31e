// Shared by the device tests: fresh random inputs, NaN-poisoned device outputs, and the
// norm-relative comparison with the CPU backend. Each test skips (and says why) only when the
// machine has no usable GPU; bench/gpu_check.sh fails if any is skipped on a GPU machine.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "core/dtype.h"

namespace qmpi::test {

class DeviceCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    const cuda::CudaProbe p = cuda::probe_cuda();
    if (!p.usable) GTEST_SKIP() << "needs a CUDA device: " << p.message;
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    gpu_ = std::make_unique<CudaBackend>();
    cpu_ = make_cpu_backend();
  }

  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  int32_t random_int(int32_t lo, int32_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  Buffer to_gpu(const std::vector<float>& host) {
    Buffer b = gpu_->alloc(host.size() * sizeof(float));
    gpu_->copy_to_device(b.data(), host.data(), host.size() * sizeof(float));
    return b;
  }
  // A device buffer full of NaN, so an element the kernel never writes shows up.
  Buffer poisoned(size_t count) {
    return to_gpu(std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()));
  }
  std::vector<float> from_gpu(const Buffer& b, size_t count) {
    std::vector<float> host(count);
    gpu_->copy_to_host(host.data(), b.data(), count * sizeof(float));
    return host;
  }

  // The same random values as a weight on both backends ([rows, cols] in `dtype`).
  struct WeightPair {
    Weight cpu, gpu;
  };
  WeightPair weight(DType dtype, int64_t rows, int64_t cols, float lo, float hi) {
    const std::vector<float> v = random(size_t(rows * cols), lo, hi);
    auto fill = [&](void* dst) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (dtype == DType::BF16) {
          static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v[i]);
        } else if (dtype == DType::F16) {
          static_cast<uint16_t*>(dst)[i] = f32_to_f16(v[i]);
        } else {
          static_cast<float*>(dst)[i] = v[i];
        }
      }
    };
    return {cpu_->make_weight(dtype, rows, cols, fill), gpu_->make_weight(dtype, rows, cols, fill)};
  }

  // Every element written (no NaN left from the poison) and ||got - want|| / ||want|| < tol.
  void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                    const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t unwritten = 0;
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!std::isfinite(got[i])) {
        ++unwritten;
        continue;
      }
      diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    EXPECT_EQ(unwritten, 0u) << what << ": elements left unwritten or not finite (seed " << seed_
                             << ")";
    const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    EXPECT_LT(rel, tol) << what << ": relative error (seed " << seed_ << ")";
    std::printf("  %-48s relative error %.2e\n", what.c_str(), rel);
  }

  unsigned seed_ = 0;
  std::mt19937 rng_;
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

inline const char* name_of(DType t) {
  return dtype_name(t).data();
}

// Elements that differ (sizes must match). Large arrays are compared through this count so a
// failure does not print millions of elements.
inline size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::max(got.size(), want.size());
  size_t n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += got[i] != want[i];
  return n;
}

}  // namespace qmpi::test
