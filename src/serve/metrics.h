// The server's counters and histograms, written by the engine loop and the fronts and read by
// GET /metrics (Prometheus text format 0.0.4) and the ZMQ stats reply. One mutex: every update
// is a few additions.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/errors.h"
#include "serve/request_hub.h"

namespace qmpi {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, increasing; +Inf is implied
  void observe(double v);
  // The "_bucket", "_sum" and "_count" lines of metric `name`; `labels` (`model_name="m"`)
  // go on each line.
  void render(const std::string& name, std::string& out, const std::string& labels = "") const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct MetricCounters {
  int64_t ok = 0, cancelled = 0, failed = 0;  // requests by how they ended
  int64_t prompt_tokens = 0, generation_tokens = 0;
};

class ServeMetrics {
 public:
  // `model_name`: the model_name label of the vllm: series (the first served name).
  explicit ServeMetrics(std::string model_name = "");

  void request_ok() { add(&MetricCounters::ok); }
  void request_cancelled() { add(&MetricCounters::cancelled); }
  void request_failed(Err code);  // refused or failed, by catalogue code
  // A client dropped for not reading (its requests count as cancelled, once, by the loop).
  void client_dropped();
  void tokens(int64_t prompt, int64_t generated);
  void first_token(double seconds);  // time to first token
  void next_token(double seconds);   // inter-token latency
  void queued_for(double seconds);   // from arrival until the engine loop took the request
  // A request that ended with an answer: `reason` is its first choice's finish_reason
  // ("stop", "length"; "cancelled" counts as vLLM's "abort"), `e2e` from arrival to the end.
  void request_finished(const std::string& reason, double e2e_seconds);
  // One engine step as rank 0 saw it: its whole time and the part spent waiting on other ranks
  // (stage 0's own compute is the rest).
  void step(double total_s, double comm_s);

  MetricCounters counters() const;
  // Prometheus text; `engine` supplies the gauges.
  std::string render(const EngineSnapshot& engine, int64_t queued) const;

 private:
  void add(int64_t MetricCounters::*field);
  // The same measures under vLLM's names (serve/vllm_metrics.cpp), for its dashboards.
  void render_vllm(const EngineSnapshot& engine, int64_t queued, std::string& out) const;

  mutable std::mutex mu_;
  MetricCounters c_;
  std::map<std::string, int64_t> errors_;  // "QM501" -> count
  int64_t clients_dropped_ = 0;
  Histogram ttft_, itl_, step_, e2e_, queue_;
  std::map<std::string, int64_t> finished_;  // vLLM's finished_reason -> requests
  std::string model_label_;                  // model_name="..."
  double step_compute_s_ = 0.0, step_comm_s_ = 0.0;
};

}  // namespace qmpi
