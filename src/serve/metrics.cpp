#include "serve/metrics.h"

#include <cmath>

#include <fmt/format.h>

#include "serve/constraint_metrics.h"

namespace qmpi {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, const std::string& name, double v) {
  out += name + " " + number(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(le), cumulative);
  }
  sample(out, name + "_sum", sum_);
  sample(out, name + "_count", double(count_));
}

ServeMetrics::ServeMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
            1.0, 2.5, 5.0}),
      step_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}) {}

void ServeMetrics::add(int64_t MetricCounters::*field) {
  std::lock_guard lock(mu_);
  c_.*field += 1;
}

void ServeMetrics::request_failed(Err code) {
  std::lock_guard lock(mu_);
  c_.failed++;
  errors_[error_id(code)]++;
}

void ServeMetrics::client_dropped() {
  std::lock_guard lock(mu_);
  clients_dropped_++;
}

void ServeMetrics::tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(mu_);
  c_.prompt_tokens += prompt;
  c_.generation_tokens += generated;
}

void ServeMetrics::first_token(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}

void ServeMetrics::next_token(double seconds) {
  std::lock_guard lock(mu_);
  itl_.observe(seconds);
}

void ServeMetrics::step(double total_s, double comm_s) {
  std::lock_guard lock(mu_);
  step_.observe(total_s);
  step_comm_s_ += comm_s;
  step_compute_s_ += total_s - comm_s;
}

MetricCounters ServeMetrics::counters() const {
  std::lock_guard lock(mu_);
  return c_;
}

namespace {

// Per data-parallel replica, labelled replica="r": where the load sits and which replica is up.
void render_replicas(const std::vector<ReplicaLoad>& replicas, std::string& out) {
  const auto each = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    for (size_t r = 0; r < replicas.size(); ++r)
      out += fmt::format("{}{{replica=\"{}\"}} {}\n", name, r, value(replicas[r]));
  };
  each("qmpi_replica_up", "gauge", "1 while the data-parallel replica serves, 0 once lost.",
       [](const ReplicaLoad& l) { return l.lost.empty() ? 1 : 0; });
  each("qmpi_replica_sequences_waiting", "gauge", "Sequences placed on the replica, not running.",
       [](const ReplicaLoad& l) { return l.waiting; });
  each("qmpi_replica_sequences_running", "gauge", "Sequences in the replica's running batch.",
       [](const ReplicaLoad& l) { return l.running; });
  each("qmpi_replica_generation_tokens_total", "counter", "Tokens the replica generated.",
       [](const ReplicaLoad& l) { return l.generated; });
}

}  // namespace

std::string ServeMetrics::render(const EngineSnapshot& e, int64_t queued) const {
  std::lock_guard lock(mu_);
  std::string out;
  header(out, "qmpi_requests_total", "counter", "Requests by how they ended.");
  out += fmt::format("qmpi_requests_total{{status=\"ok\"}} {}\n", c_.ok);
  out += fmt::format("qmpi_requests_total{{status=\"cancelled\"}} {}\n", c_.cancelled);
  out += fmt::format("qmpi_requests_total{{status=\"error\"}} {}\n", c_.failed);
  header(out, "qmpi_request_errors_total", "counter",
         "Requests refused or failed, by error catalogue code.");
  for (const auto& [code, n] : errors_)
    out += fmt::format("qmpi_request_errors_total{{code=\"{}\"}} {}\n", code, n);
  header(out, "qmpi_clients_dropped_total", "counter",
         "Clients dropped for not reading their replies (client-too-slow); their requests count "
         "as cancelled.");
  sample(out, "qmpi_clients_dropped_total", double(clients_dropped_));
  header(out, "qmpi_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  sample(out, "qmpi_prompt_tokens_total", double(c_.prompt_tokens));
  header(out, "qmpi_generation_tokens_total", "counter", "Tokens generated.");
  sample(out, "qmpi_generation_tokens_total", double(c_.generation_tokens));
  header(out, "qmpi_time_to_first_token_seconds", "histogram",
         "From a request's arrival to its first token.");
  ttft_.render("qmpi_time_to_first_token_seconds", out);
  header(out, "qmpi_inter_token_latency_seconds", "histogram",
         "Between consecutive tokens of one sequence.");
  itl_.render("qmpi_inter_token_latency_seconds", out);
  header(out, "qmpi_step_duration_seconds", "histogram", "One engine step as rank 0 sees it.");
  step_.render("qmpi_step_duration_seconds", out);
  header(out, "qmpi_step_seconds_total", "counter",
         "Step time on rank 0 (stage 0): its own compute, and its communication (TP collectives "
         "and waiting for the later stages).");
  out += fmt::format("qmpi_step_seconds_total{{part=\"stage0_compute\"}} {}\n",
                     number(step_compute_s_));
  out += fmt::format("qmpi_step_seconds_total{{part=\"comm\"}} {}\n", number(step_comm_s_));
  header(out, "qmpi_requests_queued", "gauge", "Requests received and not yet scheduled.");
  sample(out, "qmpi_requests_queued", double(queued));
  header(out, "qmpi_sequences_waiting", "gauge", "Sequences in the scheduler's waiting queue.");
  sample(out, "qmpi_sequences_waiting", double(e.waiting));
  header(out, "qmpi_sequences_running", "gauge", "Sequences in the running batch.");
  sample(out, "qmpi_sequences_running", double(e.running));
  header(out, "qmpi_kv_blocks_used", "gauge", "KV cache blocks held by sequences.");
  sample(out, "qmpi_kv_blocks_used", double(e.kv_blocks_used));
  header(out, "qmpi_kv_blocks_total", "gauge", "KV cache blocks per rank.");
  sample(out, "qmpi_kv_blocks_total", double(e.kv_blocks_total));
  header(out, "qmpi_ready", "gauge",
         "1 once every rank holds its weights, 0 while loading or draining.");
  sample(out, "qmpi_ready", e.health == Health::Ready ? 1.0 : 0.0);
  render_replicas(e.replicas, out);
  render_constraint_metrics(constraint_cache().stats(), out);
  return out;
}

}  // namespace qmpi
