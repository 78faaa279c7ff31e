#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>

#include "core/errors.h"
#include "engine/sampler.h"
#include "engine/timed_comm.h"
#include "parallel/signals.h"

namespace qmpi {
namespace {

double comm_seconds(Comm& a, Comm& b) {
  const auto* ta = dynamic_cast<TimedComm*>(&a);
  const auto* tb = dynamic_cast<TimedComm*>(&b);
  return (ta ? ta->seconds() : 0.0) + (tb ? tb->seconds() : 0.0);
}

// The 8-byte length that goes before a plan or a result, so the receiver can size its buffer.
std::shared_ptr<const std::vector<uint8_t>> size_message(uint64_t n) {
  std::vector<uint8_t> head(sizeof n);
  std::memcpy(head.data(), &n, sizeof n);
  return std::make_shared<const std::vector<uint8_t>>(std::move(head));
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Executor::Executor(const MeshPosition& pos, Comm& world, Comm& tp, Backend& backend,
                   Qwen2Model& model, KvCache& cache)
    : pos_(pos), world_(world), tp_(tp), be_(backend), model_(model), cache_(cache) {}

// Sent without waiting: a plan may be larger than MPI's eager limit, and a blocking send would
// hold this rank until the next stage has finished its current step, undoing the pipeline.
void Executor::send_plan(std::vector<uint8_t> bytes) {
  std::vector<int> to;
  if (pos_.rank == 0)
    for (int t = 1; t < pos_.tp; ++t) to.push_back(t);  // the first stage's other TP ranks
  if (pos_.next_stage_rank >= 0) to.push_back(pos_.next_stage_rank);
  if (to.empty()) return;
  const auto body = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const auto head = size_message(body->size());
  for (int peer : to) {
    world_.send_async(head, peer);
    world_.send_async(body, peer);
  }
}

std::vector<uint8_t> Executor::recv_plan() {
  const int from = pos_.stage == 0 ? 0 : pos_.prev_stage_rank;
  uint64_t n = 0;
  world_.recv(&n, sizeof n, from);
  std::vector<uint8_t> bytes(n);
  world_.recv(bytes.data(), n, from);
  return bytes;
}

void Executor::submit(const StepPlan& plan) {
  if (in_flight_.size() >= size_t(depth()))
    raise(Err::Internal, "submit with " + std::to_string(in_flight_.size()) +
                             " steps in flight, more than the pipeline's " +
                             std::to_string(depth()));
  StepPlan p = plan;
  p.valid_vocab = valid_vocab_;
  send_plan(encode_step_plan(p));
  in_flight_.emplace_back();
  execute(p);
}

StepResult Executor::collect() {
  if (in_flight_.empty()) raise(Err::Internal, "collect with no step in flight");
  StepResult local = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (pos_.result_rank == 0) return local;
  // Waiting here is the pipeline's latency, counted as communication.
  const auto t0 = std::chrono::steady_clock::now();
  const double comm0 = comm_seconds(world_, tp_);
  uint64_t n = 0;
  world_.recv(&n, sizeof n, pos_.result_rank);
  std::vector<uint8_t> bytes(n);
  world_.recv(bytes.data(), n, pos_.result_rank);
  times_.total_s += since(t0);
  times_.comm_s += comm_seconds(world_, tp_) - comm0;
  return decode_step_result(bytes);
}

StepResult Executor::step(const StepPlan& plan) {
  submit(plan);
  return collect();
}

void Executor::shutdown() {
  // A driver that stops on an error may leave steps in flight: their results are collected and
  // dropped, so that every rank finishes its sends and reaches the shutdown plan.
  while (!in_flight_.empty()) collect();
  StepPlan p;
  p.shutdown = true;
  send_plan(encode_step_plan(p));
  world_.flush_sends();
}

bool Executor::poll_stop() {
  if (!in_flight_.empty())
    raise(Err::Internal,
          "poll_stop with " + std::to_string(in_flight_.size()) + " steps still in flight");
  StepPlan p;
  p.poll_stop = true;
  send_plan(encode_step_plan(p));
  return stop_requested_anywhere(world_);
}

void Executor::serve() {
  for (;;) {
    std::vector<uint8_t> bytes = recv_plan();
    const StepPlan p = decode_step_plan(bytes);
    send_plan(std::move(bytes));
    if (p.shutdown) {
      world_.flush_sends();
      return;
    }
    if (p.poll_stop) {
      stop_requested_anywhere(world_);
      continue;
    }
    execute(p);
  }
}

void Executor::execute(const StepPlan& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  const double comm0 = comm_seconds(world_, tp_);

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

  if (pos_.rank == pos_.result_rank) {
    if (pos_.rank == 0) {
      in_flight_.back() = std::move(result);
    } else {
      // Sent without waiting: rank 0 may be busy sending this stage's next input down the
      // pipeline, and a blocking send here would close the loop into a deadlock.
      auto body = std::make_shared<const std::vector<uint8_t>>(encode_step_result(result));
      world_.send_async(size_message(body->size()), 0);
      world_.send_async(std::move(body), 0);
    }
  }

  times_.steps++;
  times_.total_s += since(t0);
  times_.comm_s += comm_seconds(world_, tp_) - comm0;
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
      // finds each sample's alternatives by position.
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

int64_t Executor::vocab_size() const {
  return model_.vocab_size();
}

}  // namespace qmpi
