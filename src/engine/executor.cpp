#include "engine/executor.h"

#include <chrono>

#include "core/errors.h"
#include "engine/timed_comm.h"
#include "parallel/signals.h"

namespace qmpi {
namespace {

double comm_seconds(Comm& a, Comm& b) {
  const auto* ta = dynamic_cast<TimedComm*>(&a);
  const auto* tb = dynamic_cast<TimedComm*>(&b);
  return (ta ? ta->seconds() : 0.0) + (tb ? tb->seconds() : 0.0);
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Executor::Executor(const MeshPosition& pos, Comm& world, Comm& tp, Comm& replica, Backend& backend,
                   DecoderModel& model, KvCache& cache)
    : pos_(pos),
      world_(world),
      tp_(tp),
      replica_(replica),
      be_(backend),
      model_(model),
      cache_(cache),
      link_(pos, world, backend) {}

void Executor::submit(const StepPlan& plan) {
  if (in_flight_.size() >= size_t(depth()))
    raise(Err::Internal, "submit with " + std::to_string(in_flight_.size()) +
                             " steps in flight, more than the pipeline's " +
                             std::to_string(depth()));
  StepPlan p = plan;
  p.valid_vocab = valid_vocab_;
  link_.send_plan(encode_step_plan(p));
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
  const std::vector<uint8_t> bytes = link_.recv_result();
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
  link_.send_plan(encode_step_plan(p));
  link_.flush();
}

bool Executor::poll_stop() {
  if (!in_flight_.empty())
    raise(Err::Internal,
          "poll_stop with " + std::to_string(in_flight_.size()) + " steps still in flight");
  StepPlan p;
  p.poll_stop = true;
  link_.send_plan(encode_step_plan(p));
  return stop_requested_anywhere(replica_);
}

void Executor::serve() {
  for (;;) {
    std::vector<uint8_t> bytes = link_.recv_plan();
    const StepPlan p = decode_step_plan(bytes);
    link_.send_plan(std::move(bytes));
    if (p.shutdown) {
      link_.flush();
      return;
    }
    if (p.poll_stop) {
      stop_requested_anywhere(replica_);
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
    if (pos_.stage != 0) link_.recv_hidden(hidden, hidden_bytes);
    // The stage's own device work, which the backend may record and replay (CUDA graphs); the
    // transfers between stages and the logits, which wait for the device, stay outside.
    be_.run_step(model_.recordable() ? shape_of(batch) : StepShape{}, [&] {
      if (pos_.stage == 0) model_.embed(batch, hidden);
      model_.run_layers(batch, hidden, cache_);
    });
    if (!pos_.last_stage()) {
      link_.send_hidden(hidden, hidden_bytes);
    } else {
      const int64_t V = vocab_size();
      // Kept across steps: at 64 rows the logits are 39 MB, above glibc's largest mmap
      // threshold, so a fresh vector was mapped, faulted in and zeroed every step (the 64-row
      // step took 217 ms, 129 without). Growing it zeroes only the new part; the model writes
      // every row.
      const size_t n = batch.logit_rows.size() * size_t(V);
      if (logits_.size() < n) logits_.resize(n);
      const std::span<float> logits(logits_.data(), n);
      model_.logits(batch, hidden, logits.data());  // every TP rank of the stage takes part
      if (pos_.tp_rank == 0)
        result = last_.finish_step(plan, logits, V,
                                   [this](int64_t n, const std::function<void(int64_t)>& task) {
                                     be_.run_tasks(n, task);
                                   });
    }
  }
  last_.forget(plan.finished);

  if (pos_.rank == pos_.result_rank) {
    if (pos_.rank == 0)
      in_flight_.back() = std::move(result);
    else
      link_.send_result(encode_step_result(result));
  }

  times_.steps++;
  times_.total_s += since(t0);
  times_.comm_s += comm_seconds(world_, tp_) - comm0;
}

int64_t Executor::vocab_size() const {
  return model_.vocab_size();
}

}  // namespace qmpi
