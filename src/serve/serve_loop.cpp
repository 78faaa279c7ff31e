#include "serve/serve_loop.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "text/tokenizer.h"

namespace qmpi {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

ServeEvent event(ServeEvent::Kind kind) {
  ServeEvent e;
  e.kind = kind;
  return e;
}

}  // namespace

// Passes a request's events on to its front, counting them in the metrics. Deltas carry the
// time of the step that sampled them.
class ServeLoop::FrontSink final : public RequestSink {
 public:
  FrontSink(ServeLoop& loop, const ServeRequest& r, int32_t n)
      : loop_(loop),
        ticket_(r.ticket),
        client_id_(r.client_id),
        arrival_(r.arrival),
        sink_(r.sink),
        last_token_(size_t(n)) {}

  void delta(int32_t index, const std::string& text, int32_t token) override {
    const Clock::time_point now = loop_.step_end_;
    ServeMetrics& m = loop_.metrics_;
    Clock::time_point& last = last_token_[size_t(index)];
    if (!first_token_seen_) {
      m.first_token(seconds(now - arrival_));
      first_token_seen_ = true;
    } else if (last != Clock::time_point{}) {
      m.next_token(seconds(now - last));
    }
    last = now;
    m.tokens(0, 1);
    ServeEvent d = event(ServeEvent::Kind::Delta);
    d.index = index;
    d.text = text;
    d.token_ids = {token};
    if (logprob_) {
      d.logprobs = {*logprob_};
      d.top_logprobs = {std::move(top_)};
      logprob_.reset();
      top_.clear();
    }
    sink_->deliver(std::move(d));
  }
  void token_logprobs(int32_t, float logprob, const std::vector<TokenLogprob>& top) override {
    logprob_ = logprob;
    top_ = top;
  }
  void final(RequestOutput out) override {
    const bool cancelled =
        std::any_of(out.choices.begin(), out.choices.end(),
                    [](const ChoiceOutput& c) { return c.finish_reason == "cancelled"; });
    if (cancelled)
      loop_.metrics_.request_cancelled();
    else
      loop_.metrics_.request_ok();
    const std::string reason = cancelled             ? "cancelled"
                               : out.choices.empty() ? "stop"
                                                     : out.choices[0].finish_reason;
    const double e2e = seconds(Clock::now() - arrival_);
    loop_.metrics_.request_finished(reason, e2e);
    if (loop_.opts_.log_requests) {
      size_t generated = 0;
      for (const ChoiceOutput& c : out.choices) generated += c.tokens.size();
      spdlog::info("request {}: {} after {:.2f} s, {} prompt and {} generated tokens", client_id_,
                   reason, e2e, out.prompt_tokens, generated);
    }
    ServeEvent ev = event(ServeEvent::Kind::Final);
    ev.result = std::make_shared<const RequestOutput>(std::move(out));
    sink_->deliver(std::move(ev));
    loop_.hub_.finished(ticket_);
  }
  void error(const Error& e) override {
    loop_.metrics_.request_failed(e.code());
    if (loop_.opts_.log_requests)
      spdlog::info("request {}: failed: {}", client_id_, error_id(e.code()));
    ServeEvent ev = event(ServeEvent::Kind::Error);
    ev.error = e;
    sink_->deliver(std::move(ev));
    loop_.hub_.finished(ticket_);
  }

 private:
  ServeLoop& loop_;
  const uint64_t ticket_;
  const std::string client_id_;
  const Clock::time_point arrival_;
  const std::shared_ptr<EventSink> sink_;
  std::vector<Clock::time_point> last_token_;  // per choice; unset before its first token
  bool first_token_seen_ = false;
  std::optional<float> logprob_;  // the next delta's, from token_logprobs()
  std::vector<TokenLogprob> top_;
};

ServeLoop::ServeLoop(const ServeLoopOptions& opts, const ModelFacts& model,
                     SequenceScheduler& sched, RequestHub& hub, ServeMetrics& metrics,
                     const StepTimes* times)
    : opts_(opts),
      sched_(sched),
      hub_(hub),
      metrics_(metrics),
      times_(times),
      pipeline_(sched, model, {opts.default_max_tokens, opts.model_name}),
      tokenizer_(model.tokenizer),
      max_model_len_(model.max_model_len),
      stats_(opts.stats_interval) {}

void ServeLoop::run(const std::function<bool()>& stop_requested) {
  // The first poll is a collective each rank joins once it holds its weights: only after it
  // is the server ready.
  bool draining = stop_requested();
  hub_.set_health(draining ? Health::Draining : Health::Ready);
  publish(draining ? Health::Draining : Health::Ready);
  auto last_poll = Clock::now();
  try {
    for (;;) {
      const bool busy = !sched_.idle();
      RequestHub::Work work =
          hub_.take(busy ? std::chrono::microseconds(0)
                         : std::chrono::duration_cast<std::chrono::microseconds>(opts_.idle_wait));
      for (ServeRequest& r : work.requests) admit(std::move(r));
      for (uint64_t ticket : work.cancels) pipeline_.cancel(int64_t(ticket));
      if (!sched_.idle()) {
        step();
      } else if (!flushed_) {
        sched_.flush_finished();
        flushed_ = true;
      }
      publish(draining ? Health::Draining : Health::Ready);
      if (!draining) {
        bool stop = opts_.stop_here && opts_.stop_here();
        if (!stop && Clock::now() - last_poll >= opts_.stop_poll) {
          last_poll = Clock::now();
          stop = poll_mesh(stop_requested);
        }
        if (stop) {
          draining = true;
          hub_.set_health(Health::Draining);
          if (const auto no_time = opts_.cut_short ? opts_.cut_short() : std::nullopt;
              no_time && (pipeline_.active() > 0 || hub_.queued() > 0)) {
            // The launcher ends a job mostly because a rank died. One more poll over the mesh
            // says which: a dead rank never joins it, and the wait's watchdog then ends the job
            // naming that rank (RankDied), which tells the clients more than this reason does.
            poll_mesh(stop_requested);
            throw *no_time;
          }
          spdlog::info("stop requested: finishing {} requests in flight, taking no new ones",
                       pipeline_.active() + size_t(hub_.queued()));
        }
      }
      if (draining && sched_.idle() && pipeline_.active() == 0 && hub_.queued() == 0) break;
    }
    if (!flushed_) sched_.flush_finished();
  } catch (const Error& e) {
    // Every request in flight or still queued hears why, before the error ends the job.
    hub_.set_health(Health::Draining);
    pipeline_.fail_all(e);
    for (ServeRequest& r : hub_.take(std::chrono::microseconds(0)).requests) {
      metrics_.request_failed(e.code());
      ServeEvent ev = event(ServeEvent::Kind::Error);
      ev.error = e;
      r.sink->deliver(std::move(ev));
      hub_.finished(r.ticket);
    }
    throw;
  }
}

bool ServeLoop::poll_mesh(const std::function<bool()>& stop_requested) {
  // A collective over every rank: no step may be in flight in the pipeline.
  const std::vector<TokenEvent> events = sched_.drain();
  step_end_ = Clock::now();
  pipeline_.dispatch(events);
  flushed_ = false;
  return stop_requested();
}

void ServeLoop::publish(Health h) {
  EngineSnapshot s;
  s.health = h;
  s.waiting = int64_t(sched_.num_waiting());
  s.running = int64_t(sched_.num_running());
  std::vector<ReplicaLoad> loads = sched_.replica_loads();
  for (const ReplicaLoad& r : loads)
    if (r.lost.empty())
      s.free_seqs += std::max<int64_t>(sched_.config().max_num_seqs - r.running, 0);
  s.requests = int64_t(pipeline_.active());
  s.kv_blocks_used = sched_.kv_blocks_in_use();
  s.kv_blocks_total = sched_.kv_blocks_total();
  s.steps = sched_.stats().steps;
  s.preemptions = sched_.stats().preemptions;
  s.max_model_len = max_model_len_;
  s.spec = sched_.stats().spec;
  s.replicas = std::move(loads);
  const std::string line = stats_.due(Clock::now(), metrics_.counters(), s, hub_.queued());
  if (!line.empty()) spdlog::info("{}", line);
  hub_.publish(std::move(s));
}

void ServeLoop::admit(ServeRequest r) {
  int64_t prompt_tokens = 0;
  try {
    prompt_tokens = pipeline_.admit(int64_t(r.ticket), r.client_id, r.req, r.prompt,
                                    std::make_shared<FrontSink>(*this, r, r.req.choice_count()));
  } catch (const Error& e) {
    metrics_.request_failed(e.code());
    ServeEvent ev = event(ServeEvent::Kind::Error);
    ev.error = e;
    r.sink->deliver(std::move(ev));
    hub_.finished(r.ticket);
    return;
  }
  metrics_.tokens(prompt_tokens, 0);
  metrics_.queued_for(seconds(Clock::now() - r.arrival));
  if (opts_.log_requests) log_received(r);
  r.sink->deliver(event(ServeEvent::Kind::Accepted));
}

void ServeLoop::log_received(const ServeRequest& r) const {
  std::string prompt = tokenizer_ ? tokenizer_->decode(r.prompt) : std::string();
  if (prompt.size() > opts_.max_log_len) prompt = prompt.substr(0, opts_.max_log_len) + "...";
  const RequestSampling& s = r.req.sampling;
  const std::optional<float> temperature = s.get(&SamplingParams::temperature);
  spdlog::info(
      "request {}: received: {} prompt tokens, n {}, max_tokens {}, temperature {}, "
      "prompt: {:?}",
      r.client_id, r.prompt.size(), s.n,
      s.max_tokens ? std::to_string(*s.max_tokens) : std::string("default"),
      temperature ? fmt::format("{}", *temperature) : std::string("default"), prompt);
}

void ServeLoop::step() {
  const double comm0 = times_ ? times_->comm_s : 0.0;
  const auto t0 = Clock::now();
  const std::vector<TokenEvent> events = sched_.step();
  step_end_ = Clock::now();
  metrics_.step(seconds(step_end_ - t0), times_ ? times_->comm_s - comm0 : 0.0);
  flushed_ = false;
  pipeline_.dispatch(events);
}

}  // namespace qmpi
