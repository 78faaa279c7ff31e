// Every CUDA backend op against the CPU backend on fresh random data (needs a GPU; see
// device_check.h). Bounds: 1e-5 relative for float32 math, 1e-2 where activations are rounded
// to bf16/f16 for the tensor cores (matmul with 16-bit weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "device_check.h"
#include "kernels/cuda/launch_shapes.h"
#include "model/rope_scaling.h"

namespace qmpi::test {
namespace {

constexpr double kF32 = 1e-5;
constexpr double k16Bit = 1e-2;

using CudaKernels = DeviceCheck;

TEST_F(CudaKernels, EmbeddingIsVocabParallel) {
  for (DType dt : {DType::BF16, DType::F32}) {
    const int64_t rows = 300, width = 96, offset = 100, n = 41;
    WeightPair t = weight(dt, rows, width, -1.0f, 1.0f);
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = random_int(0, 499);  // about 60% outside [100, 400)
    ids[0] = int32_t(offset);
    ids[1] = int32_t(offset + rows - 1);
    ids[2] = int32_t(offset + rows);
    std::vector<float> want(size_t(n * width));
    cpu_->embedding(ids.data(), n, t.cpu.view(), offset, want.data());
    Buffer out = poisoned(want.size());
    gpu_->embedding(ids.data(), n, t.gpu.view(), offset, out.as<float>());
    expect_close(from_gpu(out, want.size()), want, kF32, std::string("embedding ") + name_of(dt));
  }
}

TEST_F(CudaKernels, RmsNormMatchesForEveryWeightType) {
  for (DType dt : {DType::BF16, DType::F16, DType::F32})
    for (int64_t width : {896, 100, 4099}) {
      const int64_t n = 9;
      WeightPair w = weight(dt, 1, width, 0.5f, 1.5f);
      const std::vector<float> x = random(size_t(n * width), -3.0f, 3.0f);
      std::vector<float> want(x.size());
      cpu_->rmsnorm(x.data(), n, w.cpu.view(), 1e-6f, want.data(), {});
      Buffer dx = to_gpu(x), out = poisoned(x.size());
      gpu_->rmsnorm(dx.as<float>(), n, w.gpu.view(), 1e-6f, out.as<float>(), {});
      expect_close(from_gpu(out, x.size()), want, kF32,
                   std::string("rmsnorm ") + name_of(dt) + " width " + std::to_string(width));
      gpu_->rmsnorm(dx.as<float>(), n, w.gpu.view(), 1e-6f, dx.as<float>(), {});  // in place
      expect_close(from_gpu(dx, x.size()), want, kF32, "rmsnorm in place");
    }
}

TEST_F(CudaKernels, AddRmsNormUpdatesTheResidualAndNormsIt) {
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t width : {896, 100, 4099}) {
      const int64_t n = 9;
      WeightPair w = weight(dt, 1, width, 0.5f, 1.5f);
      const std::vector<float> x = random(size_t(n * width), -3.0f, 3.0f);
      const std::vector<float> y = random(x.size(), -3.0f, 3.0f);
      std::vector<float> sum = x, want(x.size());
      cpu_->add_rmsnorm(sum.data(), y.data(), n, w.cpu.view(), 1e-6f, want.data(), {});
      const std::string what =
          std::string("add_rmsnorm ") + name_of(dt) + " width " + std::to_string(width);
      Buffer dx = to_gpu(x), dy = to_gpu(y), out = poisoned(x.size());
      gpu_->add_rmsnorm(dx.as<float>(), dy.as<float>(), n, w.gpu.view(), 1e-6f, out.as<float>(),
                        {});
      EXPECT_EQ(mismatches(from_gpu(dx, x.size()), sum), 0u) << what << ": x + y";
      expect_close(from_gpu(out, x.size()), want, kF32, what);
      Buffer dx2 = to_gpu(x);  // out == x: the normed rows replace the sum
      gpu_->add_rmsnorm(dx2.as<float>(), dy.as<float>(), n, w.gpu.view(), 1e-6f, dx2.as<float>(),
                        {});
      expect_close(from_gpu(dx2, x.size()), want, kF32, what + " in place");
    }
}

TEST_F(CudaKernels, MatmulWithBiasForEveryWeightType) {
  struct Shape {
    int64_t n, rows, cols;
  };
  for (DType dt : {DType::BF16, DType::F16, DType::F32})
    for (Shape s : {Shape{1, 896, 896}, Shape{37, 300, 200}, Shape{128, 1152, 896}}) {
      WeightPair w = weight(dt, s.rows, s.cols, -0.1f, 0.1f);
      WeightPair b = weight(dt, 1, s.rows, -1.0f, 1.0f);
      const std::vector<float> x = random(size_t(s.n * s.cols), -2.0f, 2.0f);
      const std::string what = std::string("matmul ") + name_of(dt) + " " + std::to_string(s.n) +
                               "x" + std::to_string(s.cols) + " . " + std::to_string(s.rows) + "x" +
                               std::to_string(s.cols) + "^T";
      const double tol = dt == DType::F32 ? kF32 : k16Bit;
      std::vector<float> want(size_t(s.n * s.rows));
      const WeightView bc = b.cpu.view(), bg = b.gpu.view();
      cpu_->matmul(x.data(), s.n, w.cpu.view(), &bc, want.data());
      Buffer dx = to_gpu(x), out = poisoned(want.size());
      gpu_->matmul(dx.as<float>(), s.n, w.gpu.view(), &bg, out.as<float>());
      expect_close(from_gpu(out, want.size()), want, tol, what + " + bias");
      cpu_->matmul(x.data(), s.n, w.cpu.view(), nullptr, want.data());
      gpu_->matmul(dx.as<float>(), s.n, w.gpu.view(), nullptr, out.as<float>());
      expect_close(from_gpu(out, want.size()), want, tol, what);
    }
}

TEST_F(CudaKernels, RopeTurnsByTheCpuAngles) {
  RopeScaling yarn;
  yarn.kind = RopeKind::Yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 64;
  yarn.attention_factor = 0.1 * std::log(4.0) + 1.0;
  for (int32_t dim : {64, 128, 80}) {
    const int64_t n = 9;
    const int32_t heads = 3;
    std::vector<int32_t> pos(n);
    for (int32_t& p : pos) p = random_int(0, 32767);
    pos[0] = 0;
    const std::vector<float> x = random(size_t(n * heads * dim), -2.0f, 2.0f);
    // Plain, YaRN (scaled cos/sin), and one row per token (dynamic NTK).
    const std::vector<float> plain = rope_inv_freq(1e6, dim, RopeScaling{}, 64, 0);
    const std::vector<float> scaled = rope_inv_freq(1e6, dim, yarn, 64, 0);
    std::vector<float> rows;
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> r = rope_inv_freq(1e6 + double(t), dim, RopeScaling{}, 64, 0);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    for (const RopeFreqs& f : {RopeFreqs{plain.data(), 1, dim, 1.0f},
                               RopeFreqs{scaled.data(), 1, dim, float(yarn.attention_factor)},
                               RopeFreqs{rows.data(), n, dim, 1.0f}}) {
      std::vector<float> want = x;
      cpu_->rope(want.data(), n, heads, pos.data(), f);
      Buffer dx = to_gpu(x);
      gpu_->rope(dx.as<float>(), n, heads, pos.data(), f);
      expect_close(from_gpu(dx, x.size()), want, kF32,
                   "rope head_dim " + std::to_string(dim) + " rows " + std::to_string(f.rows));
    }
  }
}

// The paged cache of one layer on both backends, with the same contents: random K/V stored in
// every slot by the CPU kv_store, then copied byte for byte. The pools' bytes (elements, then
// fp8's scales) live in float vectors so that to_gpu / from_gpu carry them.
struct Cache {
  std::vector<float> k, v;
  Buffer dk, dv;
  KvLayerView cpu, gpu;
};

KvLayerView view_of(void* k, void* v, DType dt, int64_t blocks, int32_t block_size,
                    int32_t kv_heads, int32_t head_dim) {
  KvLayerView view{k, v, blocks, block_size, kv_heads, head_dim, dt};
  if (dt == DType::F8_E4M3) {
    const size_t scales_at = size_t(blocks * block_size * kv_heads * head_dim + 3) / 4 * 4;
    view.k_scale = reinterpret_cast<float*>(static_cast<char*>(k) + scales_at);
    view.v_scale = reinterpret_cast<float*>(static_cast<char*>(v) + scales_at);
  }
  return view;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr DType kKvTypes[] = {DType::F32, DType::BF16, DType::F8_E4M3};

struct AttentionConfig {
  int32_t heads, kv_heads, head_dim, block_size;
};

class CudaAttention : public DeviceCheck {
 protected:
  Cache cache(DType dt, int64_t blocks, int32_t block_size, int32_t kv_heads, int32_t head_dim) {
    Cache c;
    const int64_t vectors = blocks * block_size * kv_heads;
    const size_t bytes = size_t(vectors * head_dim) * dtype_size(dt);
    const size_t words = (bytes + 3) / 4 + (dt == DType::F8_E4M3 ? size_t(vectors) : 0);
    c.k.assign(words, 0.0f);
    c.v.assign(words, 0.0f);
    c.cpu = view_of(c.k.data(), c.v.data(), dt, blocks, block_size, kv_heads, head_dim);
    std::vector<int32_t> all(size_t(blocks * block_size));
    std::iota(all.begin(), all.end(), 0);
    const std::vector<float> k = random(size_t(vectors * head_dim)), v = random(k.size());
    cpu_->kv_store(k.data(), v.data(), int64_t(all.size()), all.data(), c.cpu);
    c.dk = to_gpu(c.k);
    c.dv = to_gpu(c.v);
    c.gpu = view_of(c.dk.data(), c.dv.data(), dt, blocks, block_size, kv_heads, head_dim);
    return c;
  }

  // Attention over `seqs` (table_begin filled in here) on both backends, each sequence's
  // blocks drawn at random from a pool with a few to spare.
  void check_attention(AttentionConfig cf, std::vector<AttentionSeq> seqs, DType dt) {
    int32_t needed = 0, rows = 0;
    for (AttentionSeq& s : seqs) {
      s.table_begin = needed;
      needed += (s.ctx_len + cf.block_size - 1) / cf.block_size;
      rows = std::max(rows, s.q_begin + s.q_len);
    }
    const int64_t blocks = needed + 5;
    Cache c = cache(dt, blocks, cf.block_size, cf.kv_heads, cf.head_dim);
    std::vector<int32_t> pool(static_cast<size_t>(blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng_);
    const std::vector<int32_t> tables(pool.begin(), pool.begin() + needed);

    AttentionBatch b;
    b.seqs = seqs.data();
    b.num_seqs = int32_t(seqs.size());
    b.block_tables = tables.data();
    b.num_heads = cf.heads;
    b.num_kv_heads = cf.kv_heads;
    b.head_dim = cf.head_dim;
    b.scale = 1.0f / std::sqrt(float(cf.head_dim));
    const std::vector<float> q = random(size_t(rows) * cf.heads * cf.head_dim, -3.0f, 3.0f);
    std::vector<float> want(q.size());
    cpu_->attention(q.data(), b, c.cpu, want.data());
    Buffer dq = to_gpu(q), out = poisoned(q.size());
    gpu_->attention(dq.as<float>(), b, c.gpu, out.as<float>());
    expect_close(from_gpu(out, q.size()), want, kF32,
                 "attention " + std::to_string(cf.heads) + "/" + std::to_string(cf.kv_heads) +
                     " heads, dim " + std::to_string(cf.head_dim) + ", block " +
                     std::to_string(cf.block_size) + ", " + std::to_string(seqs.size()) +
                     " seqs, " + name_of(dt) + " KV");
  }
};

TEST_F(CudaAttention, KvStoreWritesTheSameBytes) {
  for (DType dt : kKvTypes) {
    Cache c = cache(dt, 12, 16, 2, 64);
    const int64_t n = 7;
    std::vector<int32_t> all(12 * 16);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    const std::vector<int32_t> slots(all.begin(), all.begin() + n);
    std::vector<float> k = random(size_t(n * 2 * 64), -3.0f, 3.0f), v = random(k.size());
    k[5] = 0.0f;  // an e4m3 zero and a tiny value's subnormal
    k[6] = 1e-6f;
    cpu_->kv_store(k.data(), v.data(), n, slots.data(), c.cpu);
    Buffer dk = to_gpu(k), dv = to_gpu(v);
    gpu_->kv_store(dk.as<float>(), dv.as<float>(), n, slots.data(), c.gpu);
    EXPECT_TRUE(same_bytes(from_gpu(c.dk, c.k.size()), c.k)) << name_of(dt);
    EXPECT_TRUE(same_bytes(from_gpu(c.dv, c.v.size()), c.v)) << name_of(dt);
  }
}

TEST_F(CudaAttention, PrefillDecodeAndChunkedSequencesInOneBatch) {
  for (AttentionConfig cf : {AttentionConfig{14, 2, 64, 16}, AttentionConfig{4, 2, 128, 16},
                             AttentionConfig{8, 8, 64, 16}, AttentionConfig{6, 3, 80, 8},
                             AttentionConfig{2, 1, 256, 32}})
    for (DType dt : kKvTypes)
      // A 33-token prefill, a decode at context 100 and a 5-token chunk at context 40.
      check_attention(cf, {{0, 33, 33, 0}, {33, 1, 100, 0}, {34, 5, 40, 0}}, dt);
}

// Flash-decoding: few rows with long contexts split each row's keys over blocks. Contexts end
// inside chunks and inside KV blocks; the short rows leave whole chunks empty.
TEST_F(CudaAttention, SplitDecodeMatchesAcrossChunkAndBlockBoundaries) {
  const int32_t sms = gpu_->device().multiprocessors;
  for (AttentionConfig cf : {AttentionConfig{14, 2, 64, 16}, AttentionConfig{6, 3, 80, 8},
                             AttentionConfig{8, 1, 128, 16}})
    for (DType dt : kKvTypes) {
      // Decodes at contexts 1, 257, 1000 and 4097, and a 3-token chunk at context 700.
      const std::vector<AttentionSeq> mixed = {
          {0, 1, 1, 0}, {1, 1, 257, 0}, {2, 1, 1000, 0}, {3, 1, 4097, 0}, {4, 3, 700, 0}};
      ASSERT_GT(cuda::attention_split(7, cf.heads, 4097, sms).chunks, 1);
      check_attention(cf, mixed, dt);
      // One sequence alone: the most chunks.
      ASSERT_GT(cuda::attention_split(1, cf.heads, 2000, sms).chunks, 2);
      check_attention(cf, {{0, 1, 2000, 0}}, dt);
    }
}

TEST_F(CudaKernels, SiluMulAddGatherAndScatterRows) {
  const int64_t n = 13, width = 4864;
  const std::vector<float> gate = random(size_t(n * width), -6.0f, 6.0f), up = random(gate.size());
  std::vector<float> want(gate.size());
  cpu_->silu_mul(gate.data(), up.data(), n, width, want.data(), {});
  Buffer dg = to_gpu(gate), du = to_gpu(up), out = poisoned(gate.size());
  gpu_->silu_mul(dg.as<float>(), du.as<float>(), n, width, out.as<float>(), {});
  expect_close(from_gpu(out, want.size()), want, kF32, "silu_mul");

  std::vector<float> x = gate;
  cpu_->add(x.data(), up.data(), int64_t(x.size()));
  gpu_->add(dg.as<float>(), du.as<float>(), int64_t(x.size()));
  expect_close(from_gpu(dg, x.size()), x, kF32, "add");

  const std::vector<int32_t> rows = {12, 0, 5, 5, 7};
  std::vector<float> gathered(rows.size() * size_t(width));
  cpu_->gather_rows(up.data(), rows.data(), int64_t(rows.size()), width, gathered.data());
  Buffer dgat = poisoned(gathered.size());
  gpu_->gather_rows(du.as<float>(), rows.data(), int64_t(rows.size()), width, dgat.as<float>());
  EXPECT_EQ(mismatches(from_gpu(dgat, gathered.size()), gathered), 0u);

  // The MoE return path: distinct rows, scaled, added into what is there.
  const std::vector<int32_t> distinct = {12, 0, 5, 7};
  const std::vector<float> scales = {0.25f, -1.5f, 2.0f, 0.0f};
  std::vector<float> acc = gate;
  cpu_->scatter_add_rows(up.data(), distinct.data(), scales.data(), 4, width, acc.data());
  Buffer dacc = to_gpu(gate);
  gpu_->scatter_add_rows(du.as<float>(), distinct.data(), scales.data(), 4, width,
                         dacc.as<float>());
  expect_close(from_gpu(dacc, acc.size()), acc, kF32, "scatter_add_rows");
}

TEST_F(CudaKernels, MetadataUploadsFollowChangingHostArrays) {
  // Every layer passes the same host arrays, so unchanged uploads are skipped; a changed array
  // (same pointer, new contents) must still reach the device.
  const int32_t heads = 2, dim = 64;
  std::vector<int32_t> pos = {3, 9};
  const std::vector<float> x = random(size_t(2 * heads * dim));
  const std::vector<float> inv = rope_inv_freq(1e4, dim, RopeScaling{}, 64, 0);
  const RopeFreqs f{inv.data(), 1, dim, 1.0f};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> want = x;
    cpu_->rope(want.data(), 2, heads, pos.data(), f);
    Buffer dx = to_gpu(x);
    gpu_->rope(dx.as<float>(), 2, heads, pos.data(), f);
    expect_close(from_gpu(dx, x.size()), want, kF32, "rope after metadata change");
    pos[0] += 1;
    pos[1] += 7;
  }
}

TEST_F(CudaKernels, AllocatorCountsWeightsAndBuffers) {
  const cuda::MemoryCounters before = gpu_->memory_counters();
  {
    WeightPair w = weight(DType::BF16, 64, 32, -1.0f, 1.0f);
    Buffer b = gpu_->alloc(1000);
    const cuda::MemoryCounters& c = gpu_->memory_counters();
    EXPECT_EQ(c.used(cuda::MemPurpose::Weights),
              before.used(cuda::MemPurpose::Weights) + 64 * 32 * 2);
    EXPECT_EQ(c.used(cuda::MemPurpose::Buffers), before.used(cuda::MemPurpose::Buffers) + 1000);
  }
  EXPECT_EQ(gpu_->memory_counters().total_in_use(), before.total_in_use());
}

}  // namespace
}  // namespace qmpi::test
