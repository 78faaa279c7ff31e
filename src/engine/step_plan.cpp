#include "engine/step_plan.h"

#include <cstring>
#include <type_traits>

#include "core/errors.h"

namespace qmpi {
namespace {

class Writer {
 public:
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    pod(uint64_t(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  template <class T>
  T pod() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> vec() {
    const auto n = pod<uint64_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }

 private:
  void need(size_t n) {
    if (at_ + n > b_.size()) raise(Err::Internal, "truncated step plan or result");
  }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode_step_plan(const StepPlan& plan) {
  Writer w;
  w.pod(uint8_t(plan.shutdown | (plan.poll_stop << 1)));
  w.pod(plan.valid_vocab);
  w.pod(uint64_t(plan.seqs.size()));
  for (const auto& s : plan.seqs) {
    w.pod(s.id);
    w.pod(s.start_pos);
    w.vec(s.tokens);
    w.vec(s.block_table);
    w.pod(uint8_t(s.all_logits | (s.sample << 1) | (s.first_chunk << 2)));
    w.pod(s.sampling);
    w.pod(s.sample_index);
    w.vec(s.cached_prefix);
  }
  w.vec(plan.finished);
  return std::move(w.out);
}

StepPlan decode_step_plan(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  StepPlan p;
  const auto plan_flags = r.pod<uint8_t>();
  p.shutdown = plan_flags & 1;
  p.poll_stop = plan_flags & 2;
  p.valid_vocab = r.pod<int64_t>();
  const auto n = r.pod<uint64_t>();
  p.seqs.resize(n);
  for (auto& s : p.seqs) {
    s.id = r.pod<int64_t>();
    s.start_pos = r.pod<int32_t>();
    s.tokens = r.vec<int32_t>();
    s.block_table = r.vec<int32_t>();
    const auto flags = r.pod<uint8_t>();
    s.all_logits = flags & 1;
    s.sample = flags & 2;
    s.first_chunk = flags & 4;
    s.sampling = r.pod<SamplingParams>();
    s.sample_index = r.pod<uint32_t>();
    s.cached_prefix = r.vec<int32_t>();
  }
  p.finished = r.vec<int64_t>();
  return p;
}

std::vector<uint8_t> encode_step_result(const StepResult& r) {
  Writer w;
  w.vec(r.tokens);
  w.vec(r.logprobs);
  w.vec(r.logits);
  w.vec(r.top_tokens);
  w.vec(r.top_logprobs);
  return std::move(w.out);
}

StepResult decode_step_result(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  StepResult out;
  out.tokens = r.vec<int32_t>();
  out.logprobs = r.vec<float>();
  out.logits = r.vec<float>();
  out.top_tokens = r.vec<int32_t>();
  out.top_logprobs = r.vec<float>();
  return out;
}

BatchInput make_batch(const StepPlan& plan, int block_size) {
  BatchInput b;
  for (const auto& s : plan.seqs) {
    AttentionSeq a;
    a.q_begin = int32_t(b.tokens.size());
    a.q_len = int32_t(s.tokens.size());
    a.ctx_len = s.start_pos + a.q_len;
    a.table_begin = int32_t(b.block_tables.size());
    b.seqs.push_back(a);
    b.block_tables.insert(b.block_tables.end(), s.block_table.begin(), s.block_table.end());
    for (int32_t i = 0; i < a.q_len; ++i) {
      const int32_t pos = s.start_pos + i;
      const int32_t block = size_t(pos / block_size) < s.block_table.size()
                                ? s.block_table[size_t(pos / block_size)]
                                : -1;
      if (block < 0) raise(Err::Internal, "step plan: sequence has no KV block for its position");
      b.tokens.push_back(s.tokens[size_t(i)]);
      b.positions.push_back(pos);
      b.slots.push_back(block * block_size + pos % block_size);
    }
    if (s.all_logits) {
      for (int32_t i = 0; i < a.q_len; ++i) b.logit_rows.push_back(a.q_begin + i);
    } else if (s.sample) {
      b.logit_rows.push_back(a.q_begin + a.q_len - 1);
    }
  }
  return b;
}

}  // namespace qmpi
