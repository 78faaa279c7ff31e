#include "engine/step_plan.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <variant>

#include "core/errors.h"

namespace qmpi {
namespace {

// The wire format, once: each list below names the fields of one message part in wire order,
// and both the encoder and the decoder walk it, so they cannot disagree. Scalars go as their
// bytes (every supported host is little-endian), bools as one byte (0 or 1), vectors as a uint64
// count then their items. Change a list, and kStepWireVersion with it: a rank of another build then
// fails with StepMessage instead of misreading.
// Sampling: the scalar fields in the order of their table (engine/sampling_params.h), then
// top_logprobs.
template <class Io, class Params>
void sampling_fields(Io& io, Params& p) {
  for (const SamplingField& row : kSamplingFields)
    std::visit([&](auto member) { io(p.*member); }, row.member);
  io(p.top_logprobs);
}

template <class Io, class Seq>
void seq_fields(Io& io, Seq& s) {
  io(s.id);
  io(s.start_pos);
  io(s.tokens);
  io(s.draft);
  io(s.block_table);
  io(s.all_logits);
  io(s.sample);
  io(s.first_chunk);
  sampling_fields(io, s.sampling);
  io(s.sample_index);
  io(s.cached_prefix);
  io(s.allowed);
  io(s.adapter);
}

template <class Io, class Plan>
void plan_fields(Io& io, Plan& p) {
  io(p.shutdown);
  io(p.poll_stop);
  io(p.valid_vocab);
  io(p.seqs);
  io(p.finished);
}

template <class Io, class Result>
void result_fields(Io& io, Result& r) {
  io(r.counts);
  io(r.tokens);
  io(r.logprobs);
  io(r.logits);
  io(r.top_tokens);
  io(r.top_logprobs);
}

class Writer {
 public:
  Writer() { (*this)(kStepWireVersion); }
  template <class T>
  requires std::is_arithmetic_v<T>
  void operator()(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void operator()(const bool& v) { (*this)(uint8_t(v ? 1 : 0)); }
  template <class T>
  requires std::is_arithmetic_v<T>
  void operator()(const std::vector<T>& v) {
    (*this)(uint64_t(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(T));
  }
  void operator()(const std::vector<StepSeq>& v) {
    (*this)(uint64_t(v.size()));
    for (const StepSeq& s : v) seq_fields(*this, s);
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  Reader(std::span<const uint8_t> b, const char* what) : b_(b), what_(what) {
    uint8_t version = 0;
    (*this)(version);
    if (version != kStepWireVersion)
      raise(Err::StepMessage, std::string("a step ") + what_ + " in wire format version " +
                                  std::to_string(version) + " reached a rank that reads version " +
                                  std::to_string(kStepWireVersion));
  }
  template <class T>
  requires std::is_arithmetic_v<T>
  void operator()(T& v) {
    need(sizeof(T));
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
  }
  void operator()(bool& v) {
    uint8_t b = 0;
    (*this)(b);
    if (b > 1) garbled("a flag byte is " + std::to_string(b));
    v = b == 1;
  }
  template <class T>
  requires std::is_arithmetic_v<T>
  void operator()(std::vector<T>& v) {
    uint64_t n = 0;
    (*this)(n);
    if (n > (b_.size() - at_) / sizeof(T)) garbled("a list of " + std::to_string(n) + " items");
    v.resize(n);
    // memcpy from or to an empty vector's null data() is undefined even for zero bytes.
    if (n) std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  void operator()(std::vector<StepSeq>& v) {
    uint64_t n = 0;
    (*this)(n);
    // Every sequence takes more than one byte: a count beyond the bytes left is garbage, and
    // nothing is allocated for it.
    if (n > b_.size() - at_) garbled("a list of " + std::to_string(n) + " sequences");
    v.resize(n);
    for (StepSeq& s : v) seq_fields(*this, s);
  }
  void finish() const {
    if (at_ != b_.size())
      garbled(std::to_string(b_.size() - at_) + " bytes are left over after the last field");
  }

 private:
  void need(size_t n) const {
    if (n > b_.size() - at_) garbled("it ends before its last field");
  }
  [[noreturn]] void garbled(const std::string& why) const {
    raise(Err::StepMessage, std::string("a step ") + what_ + " of " + std::to_string(b_.size()) +
                                " bytes cannot be read: " + why);
  }
  std::span<const uint8_t> b_;
  const char* what_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode_step_plan(const StepPlan& plan) {
  Writer w;
  plan_fields(w, plan);
  return std::move(w.out);
}

StepPlan decode_step_plan(std::span<const uint8_t> bytes) {
  Reader r(bytes, "plan");
  StepPlan p;
  plan_fields(r, p);
  r.finish();
  return p;
}

std::vector<uint8_t> encode_step_result(const StepResult& result) {
  Writer w;
  result_fields(w, result);
  return std::move(w.out);
}

StepResult decode_step_result(std::span<const uint8_t> bytes) {
  Reader r(bytes, "result");
  StepResult out;
  result_fields(r, out);
  r.finish();
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
    if (s.draft < 0 || s.draft >= a.q_len || (s.draft > 0 && (!s.sample || s.all_logits)))
      raise(Err::Internal, "step plan: sequence has " + std::to_string(s.draft) +
                               " guesses among " + std::to_string(a.q_len) + " new tokens");
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
    if (s.adapter >= 0) {
      // Every rank groups the same rows the same way: the groups follow the plan's order.
      auto g = std::find_if(b.lora.begin(), b.lora.end(),
                            [&](const LoraRows& r) { return r.adapter == s.adapter; });
      if (g == b.lora.end()) g = b.lora.insert(b.lora.end(), LoraRows{s.adapter, {}});
      for (int32_t i = 0; i < a.q_len; ++i) g->rows.push_back(a.q_begin + i);
    }
    if (s.all_logits) {
      for (int32_t i = 0; i < a.q_len; ++i) b.logit_rows.push_back(a.q_begin + i);
    } else if (s.sample) {
      for (int32_t i = a.q_len - 1 - s.draft; i < a.q_len; ++i)
        b.logit_rows.push_back(a.q_begin + i);
    }
  }
  return b;
}

}  // namespace qmpi
