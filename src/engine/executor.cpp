#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "dist/signals.h"
#include "engine/sampler.h"
#include "engine/timed_comm.h"

namespace qmpi {

Executor::Executor(const MeshPosition& pos, Comm& world, Comm& tp, Backend& backend,
                   Qwen2Model& model, KvCache& cache)
    : pos_(pos), world_(world), tp_(tp), be_(backend), model_(model), cache_(cache) {}

void Executor::broadcast_plan(StepPlan* plan) {
  std::vector<uint8_t> bytes;
  uint64_t n = 0;
  if (pos_.rank == 0) {
    bytes = encode_step_plan(*plan);
    n = bytes.size();
  }
  world_.broadcast(&n, sizeof n, 0);
  bytes.resize(n);
  world_.broadcast(bytes.data(), n, 0);
  if (pos_.rank != 0) *plan = decode_step_plan(bytes);
}

StepResult Executor::step(const StepPlan& plan) {
  StepPlan p = plan;
  p.valid_vocab = valid_vocab_;
  broadcast_plan(&p);
  return execute(p);
}

void Executor::shutdown() {
  StepPlan p;
  p.shutdown = true;
  broadcast_plan(&p);
}

bool Executor::poll_stop() {
  StepPlan p;
  p.poll_stop = true;
  broadcast_plan(&p);
  return stop_requested_anywhere(world_);
}

void Executor::serve() {
  for (;;) {
    StepPlan p;
    broadcast_plan(&p);
    if (p.shutdown) return;
    if (p.poll_stop) {
      stop_requested_anywhere(world_);
      continue;
    }
    execute(p);
  }
}

StepResult Executor::execute(const StepPlan& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  auto* tw = dynamic_cast<TimedComm*>(&world_);
  auto* tt = dynamic_cast<TimedComm*>(&tp_);
  const double comm0 = (tw ? tw->seconds() : 0.0) + (tt ? tt->seconds() : 0.0);

  const BatchInput batch = make_batch(plan, cache_.shape().block_size);
  const int64_t T = batch.num_tokens();
  const int64_t h = model_.hidden_size();
  const size_t hidden_bytes = size_t(T * h) * sizeof(float);
  if (hidden_.bytes() < hidden_bytes) hidden_ = be_.alloc(hidden_bytes);
  float* hidden = hidden_.as<float>();

  StepResult result;
  if (T > 0) {
    if (pos_.stage == 0)
      model_.embed(batch, hidden);
    else
      recv_hidden(hidden, hidden_bytes);
    model_.run_layers(batch, hidden, cache_);
    if (pos_.stage + 1 < pos_.pp)
      send_hidden(hidden, hidden_bytes);
    else
      result = finish_on_last_stage(plan, batch, hidden);
  }
  for (int64_t id : plan.finished) history_.erase(id);

  if (pos_.rank == pos_.result_rank && pos_.rank != 0) send_result(result);
  if (pos_.rank == 0 && pos_.result_rank != 0) result = recv_result(plan);

  times_.steps++;
  times_.total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  times_.comm_s += (tw ? tw->seconds() : 0.0) + (tt ? tt->seconds() : 0.0) - comm0;
  return result;
}

// Stage-to-stage hidden states go over the world comm (MPI), which needs host memory: device
// backends stage through a host buffer.
void Executor::send_hidden(const float* hidden, size_t bytes) {
  if (be_.host_memory()) return world_.send(hidden, bytes, pos_.next_stage_rank);
  staging_.resize(bytes);
  be_.copy_to_host(staging_.data(), hidden, bytes);
  world_.send(staging_.data(), bytes, pos_.next_stage_rank);
}

void Executor::recv_hidden(float* hidden, size_t bytes) {
  if (be_.host_memory()) return world_.recv(hidden, bytes, pos_.prev_stage_rank);
  staging_.resize(bytes);
  world_.recv(staging_.data(), bytes, pos_.prev_stage_rank);
  be_.copy_to_device(hidden, staging_.data(), bytes);
}

StepResult Executor::finish_on_last_stage(const StepPlan& plan, const BatchInput& batch,
                                          const float* hidden) {
  const int64_t V = vocab_size();
  std::vector<float> logits(batch.logit_rows.size() * size_t(V));
  model_.logits(batch, hidden, logits.data());  // every TP rank of the stage takes part
  StepResult r;
  if (pos_.tp_rank != 0) return r;

  size_t row = 0;
  for (const auto& s : plan.seqs) {
    auto& hist = history_[s.id];
    if (s.first_chunk) hist = s.cached_prefix;
    hist.insert(hist.end(), s.tokens.begin(), s.tokens.end());
    const size_t rows = s.all_logits ? s.tokens.size() : (s.sample ? 1 : 0);
    if (s.all_logits)
      r.logits.insert(r.logits.end(), logits.begin() + long(row * V),
                      logits.begin() + long((row + rows) * V));
    if (s.sample) {
      std::span<float> last(logits.data() + (row + rows - 1) * V, size_t(V));
      const int64_t valid = plan.valid_vocab > 0 ? std::min(plan.valid_vocab, V) : V;
      const Sampled sm = sample_token(last, valid, s.sampling, s.sample_index, hist);
      r.tokens.push_back(sm.token);
      r.logprobs.push_back(sm.logprob);
      // Always k entries per sample (padded when the vocabulary is smaller), so that rank 0
      // knows the sizes from the plan alone.
      for (int32_t i = 0; i < s.sampling.top_logprobs; ++i) {
        const bool have = size_t(i) < sm.top.size();
        r.top_tokens.push_back(have ? sm.top[size_t(i)].token : -1);
        r.top_logprobs.push_back(have ? sm.top[size_t(i)].logprob
                                      : -std::numeric_limits<float>::infinity());
      }
    }
    row += rows;
  }
  return r;
}

int64_t Executor::vocab_size() const { return model_.vocab_size(); }

void Executor::send_result(const StepResult& r) {
  world_.send(r.tokens.data(), r.tokens.size() * sizeof(int32_t), 0);
  world_.send(r.logprobs.data(), r.logprobs.size() * sizeof(float), 0);
  world_.send(r.logits.data(), r.logits.size() * sizeof(float), 0);
  world_.send(r.top_tokens.data(), r.top_tokens.size() * sizeof(int32_t), 0);
  world_.send(r.top_logprobs.data(), r.top_logprobs.size() * sizeof(float), 0);
}

StepResult Executor::recv_result(const StepPlan& plan) {
  size_t samples = 0, rows = 0, tops = 0;
  for (const auto& s : plan.seqs) {
    samples += s.sample ? 1 : 0;
    tops += s.sample ? size_t(std::max(s.sampling.top_logprobs, 0)) : 0;
    rows += s.all_logits ? s.tokens.size() : 0;
  }
  StepResult r;
  r.tokens.resize(samples);
  r.logprobs.resize(samples);
  r.logits.resize(rows * size_t(vocab_size()));
  world_.recv(r.tokens.data(), r.tokens.size() * sizeof(int32_t), pos_.result_rank);
  world_.recv(r.logprobs.data(), r.logprobs.size() * sizeof(float), pos_.result_rank);
  world_.recv(r.logits.data(), r.logits.size() * sizeof(float), pos_.result_rank);
  r.top_tokens.resize(tops);
  r.top_logprobs.resize(tops);
  world_.recv(r.top_tokens.data(), r.top_tokens.size() * sizeof(int32_t), pos_.result_rank);
  world_.recv(r.top_logprobs.data(), r.top_logprobs.size() * sizeof(float), pos_.result_rank);
  return r;
}

}  // namespace qmpi
