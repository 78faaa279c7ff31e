// The serving driver on rank 0's MPI thread: takes requests and cancels from the hub between
// steps, hands them to the request pipeline (requests/pipeline.h: n sequences per request, stop
// strings as in batch), steps the mesh while there is work, and passes each request's events on
// to its front's sink. It never waits on a client: when idle it waits on the hub for a
// moment, then polls for a stop (a collective on the mesh, so every rank stops at the same
// step). The poll also keeps the other ranks' wait for the next plan far below --comm-timeout
// however long the server idles. A stop drains: no new requests, the accepted ones finish,
// then it returns.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "engine/executor.h"
#include "engine/scheduler.h"
#include "requests/pipeline.h"
#include "serve/metrics.h"
#include "serve/request_hub.h"
#include "serve/stats_line.h"

namespace qmpi {

struct ServeLoopOptions {
  int64_t default_max_tokens = 0;  // as in batch: 0 = 16 for completions, the rest for chat
  std::string model_name;          // "model" of responses to requests that name none
  std::chrono::milliseconds idle_wait{20};    // longest wait on the hub while idle
  std::chrono::milliseconds stop_poll{1000};  // time between collective stop polls
  // A signal that reached this process (rank 0), checked every iteration without a collective;
  // the collective poll (which empties the pipeline first) only catches the signals that reached
  // other ranks alone. Null: none.
  std::function<bool()> stop_here;
  // Why a stop leaves no time to drain (the launcher is ending the job and kills every rank a
  // moment later), checked when a stop is seen: after one more stop poll (where a dead rank's
  // absence raises its own error first), the requests in flight and queued get this error at
  // once, and run() raises it. Null, or nullopt: the stop drains.
  std::function<std::optional<Error>()> cut_short;
  // vLLM's logging: a stats line this often (0: none; --disable-log-stats), and with
  // log_requests (--enable-log-requests) a line per request received, its prompt cut to
  // max_log_len characters, and one when it ends.
  std::chrono::milliseconds stats_interval{0};
  bool log_requests = false;
  size_t max_log_len = 200;
};

class ServeLoop {
 public:
  // `times` (may be null) is rank 0's executor clock, for the per-step compute/comm split.
  ServeLoop(const ServeLoopOptions& opts, const ModelFacts& model, SequenceScheduler& sched,
            RequestHub& hub, ServeMetrics& metrics, const StepTimes* times = nullptr);

  // Serves until opts.stop_here or `stop_requested` (polled on entry and every opts.stop_poll;
  // a collective in the real server) says so and everything accepted has finished (or, when
  // opts.cut_short gives a reason, has been failed with it). Marks the hub
  // Ready after the first poll and Draining on a stop. If the engine fails, every request in flight
  // or queued gets the error before it propagates.
  void run(const std::function<bool()>& stop_requested);

 private:
  class FrontSink;

  void admit(ServeRequest r);
  void log_received(const ServeRequest& r) const;
  void step();
  // Lets every step in flight finish and delivers its tokens, then polls stop_requested (a
  // collective over the mesh); returns its answer.
  bool poll_mesh(const std::function<bool()>& stop_requested);
  void publish(Health h);

  const ServeLoopOptions& opts_;
  SequenceScheduler& sched_;
  RequestHub& hub_;
  ServeMetrics& metrics_;
  const StepTimes* times_;
  RequestPipeline pipeline_;                        // keyed by ticket
  std::chrono::steady_clock::time_point step_end_;  // when the tokens being dispatched came
  bool flushed_ = true;  // the last stage has dropped the state of finished sequences
  const Tokenizer* tokenizer_;
  const int64_t max_model_len_;  // for --enable-log-requests' prompt text
  StatsLine stats_;
};

}  // namespace qmpi
