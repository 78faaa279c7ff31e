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

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  }
  return out;
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

void Histogram::render(const std::string& name, std::string& out, const std::string& labels) const {
  uint64_t cumulative = 0;
  const std::string before_le = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, before_le, number(le), cumulative);
  }
  const std::string set = labels.empty() ? "" : "{" + labels + "}";
  sample(out, name + "_sum" + set, sum_);
  sample(out, name + "_count" + set, double(count_));
}

ServeMetrics::ServeMetrics(std::string model_name)
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
            1.0, 2.5, 5.0}),
      step_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      queue_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
              30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      model_label_(fmt::format("model_name=\"{}\"", label_value(model_name))) {}

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

void ServeMetrics::queued_for(double seconds) {
  std::lock_guard lock(mu_);
  queue_.observe(seconds);
}

void ServeMetrics::request_finished(const std::string& reason, double e2e_seconds) {
  std::lock_guard lock(mu_);
  finished_[reason == "cancelled" ? "abort" : reason]++;
  e2e_.observe(e2e_seconds);
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

// Speculative decoding's counters, under vLLM's names so that its dashboards read them.
void render_spec_decode(const SpecDecodeStats& s, std::string& out) {
  header(out, "vllm:spec_decode_num_drafts_total", "counter",
         "Sequence steps that carried guessed tokens.");
  sample(out, "vllm:spec_decode_num_drafts_total", double(s.drafts));
  header(out, "vllm:spec_decode_num_draft_tokens_total", "counter", "Guessed tokens checked.");
  sample(out, "vllm:spec_decode_num_draft_tokens_total", double(s.draft_tokens));
  header(out, "vllm:spec_decode_num_accepted_tokens_total", "counter",
         "Guessed tokens the model agreed with.");
  sample(out, "vllm:spec_decode_num_accepted_tokens_total", double(s.accepted_tokens));
  header(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Guessed tokens accepted, by position among the step's guesses (0: the first).");
  for (size_t i = 0; i < s.accepted_per_position.size(); ++i)
    out += fmt::format("vllm:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{}\"}} {}\n",
                       i, s.accepted_per_position[i]);
}

}  // namespace

// vLLM's names and model_name label (as its V1 engine writes them, and the V0 names dashboards
// still query), so a vLLM Grafana dashboard works unchanged (docs/grafana-qmpi.json).
void ServeMetrics::render_vllm(const EngineSnapshot& e, int64_t queued, std::string& out) const {
  const std::string& m = model_label_;
  const auto gauge = [&](const char* name, const char* type, const char* help, double v) {
    header(out, name, type, help);
    out += fmt::format("{}{{{}}} {}\n", name, m, number(v));
  };
  gauge("vllm:num_requests_running", "gauge", "Sequences in the running batch.", double(e.running));
  gauge("vllm:num_requests_waiting", "gauge", "Requests received and sequences waiting to run.",
        double(e.waiting + queued));
  const double kv =
      e.kv_blocks_total > 0 ? double(e.kv_blocks_used) / double(e.kv_blocks_total) : 0.0;
  gauge("vllm:kv_cache_usage_perc", "gauge", "KV cache usage (1 = full).", kv);
  gauge("vllm:gpu_cache_usage_perc", "gauge", "KV cache usage (1 = full; vLLM V0's name).", kv);
  gauge("vllm:num_preemptions_total", "counter", "Sequences preempted (to be recomputed).",
        double(e.preemptions));
  gauge("vllm:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
        double(c_.prompt_tokens));
  gauge("vllm:generation_tokens_total", "counter", "Tokens generated.",
        double(c_.generation_tokens));
  header(out, "vllm:request_success_total", "counter", "Requests answered, by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    const auto it = finished_.find(reason);
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", m, reason,
                       it == finished_.end() ? 0 : it->second);
  }
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    header(out, name, "histogram", help);
    h.render(name, out, m);
  };
  histogram("vllm:time_to_first_token_seconds", "From a request's arrival to its first token.",
            ttft_);
  histogram("vllm:inter_token_latency_seconds", "Between consecutive tokens of one sequence.",
            itl_);
  histogram("vllm:time_per_output_token_seconds",
            "Between consecutive tokens of one sequence (vLLM V0's name).", itl_);
  histogram("vllm:e2e_request_latency_seconds", "From a request's arrival to its last token.",
            e2e_);
  histogram("vllm:request_queue_time_seconds",
            "From a request's arrival until the engine loop takes it.", queue_);
}

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
         "Clients dropped for not reading their replies (client-too-slow): ZeroMQ connections "
         "and HTTP streams.");
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
  render_vllm(e, queued, out);
  render_spec_decode(e.spec, out);
  render_constraint_metrics(constraint_cache().stats(), out);
  return out;
}

}  // namespace qmpi
