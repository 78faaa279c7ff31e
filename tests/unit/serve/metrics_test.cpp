// Prometheus text: cumulative buckets, every series the docs name, counters that add up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace qmpi {
namespace {

using ::testing::HasSubstr;

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.7);
  h.observe(5.0);
  std::string out;
  h.render("x", out);
  EXPECT_EQ(out,
            "x_bucket{le=\"0.1\"} 1\nx_bucket{le=\"1\"} 3\nx_bucket{le=\"+Inf\"} 4\n"
            "x_sum 6.25\nx_count 4\n");
}

TEST(Metrics, RendersEverySeries) {
  ServeMetrics m;
  m.request_ok();
  m.request_ok();
  m.request_cancelled();
  m.request_failed(Err::Busy);
  m.client_dropped();
  m.tokens(12, 0);
  m.tokens(0, 5);
  m.first_token(0.2);
  m.next_token(0.01);
  m.step(0.02, 0.005);
  EngineSnapshot e;
  e.health = Health::Ready;
  e.kv_blocks_used = 3;
  e.kv_blocks_total = 64;
  e.replicas = {{1, 2, 30, ""}, {0, 0, 12, "rank 3 stopped answering"}};
  e.spec.drafts = 5;
  e.spec.draft_tokens = 20;
  e.spec.accepted_tokens = 9;
  e.spec.accepted_per_position = {4, 3, 2, 0};
  const std::string t = m.render(e, 4);
  EXPECT_THAT(t, HasSubstr("qmpi_requests_total{status=\"ok\"} 2\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_requests_total{status=\"cancelled\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_requests_total{status=\"error\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_request_errors_total{code=\"QM504\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_clients_dropped_total 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_requests_total{status=\"error\"} 1\n"))
      << "a dropped client is not one more failed request";
  EXPECT_THAT(t, HasSubstr("qmpi_prompt_tokens_total 12\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_generation_tokens_total 5\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_time_to_first_token_seconds_count 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_inter_token_latency_seconds_count 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_step_duration_seconds_count 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_step_seconds_total{part=\"comm\"} 0.005\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_requests_queued 4\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_kv_blocks_used 3\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_kv_blocks_total 64\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_ready 1\n"));
  EXPECT_THAT(t, HasSubstr("# TYPE qmpi_time_to_first_token_seconds histogram\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_replica_up{replica=\"0\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_replica_up{replica=\"1\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_replica_sequences_waiting{replica=\"0\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_replica_sequences_running{replica=\"0\"} 2\n"));
  EXPECT_THAT(t, HasSubstr("qmpi_replica_generation_tokens_total{replica=\"1\"} 12\n"));
  EXPECT_THAT(t, HasSubstr("# TYPE qmpi_replica_generation_tokens_total counter\n"));
  EXPECT_THAT(t, HasSubstr("vllm:spec_decode_num_drafts_total 5\n"));
  EXPECT_THAT(t, HasSubstr("vllm:spec_decode_num_draft_tokens_total 20\n"));
  EXPECT_THAT(t, HasSubstr("vllm:spec_decode_num_accepted_tokens_total 9\n"));
  EXPECT_THAT(t,
              HasSubstr("vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 3\n"));
  EXPECT_THAT(t,
              HasSubstr("vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"3\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"));
  const MetricCounters c = m.counters();
  EXPECT_EQ(c.ok, 2);
  EXPECT_EQ(c.prompt_tokens, 12);
}

TEST(Metrics, VllmNamesCarryTheModelName) {
  ServeMetrics m("qwen \"7b\"");
  m.tokens(12, 0);
  m.tokens(0, 5);
  m.first_token(0.2);
  m.next_token(0.01);
  m.queued_for(0.4);
  m.request_finished("length", 1.5);
  m.request_finished("stop", 0.7);
  m.request_finished("cancelled", 0.1);
  EngineSnapshot e;
  e.running = 3;
  e.waiting = 2;
  e.kv_blocks_used = 16;
  e.kv_blocks_total = 64;
  e.preemptions = 7;
  const std::string t = m.render(e, 1);
  const std::string l = "{model_name=\"qwen \\\"7b\\\"\"";  // the quotes escaped
  EXPECT_THAT(t, HasSubstr("vllm:num_requests_running" + l + "} 3\n"));
  EXPECT_THAT(t, HasSubstr("vllm:num_requests_waiting" + l + "} 3\n")) << "queued + waiting";
  EXPECT_THAT(t, HasSubstr("vllm:kv_cache_usage_perc" + l + "} 0.25\n"));
  EXPECT_THAT(t, HasSubstr("vllm:gpu_cache_usage_perc" + l + "} 0.25\n"));
  EXPECT_THAT(t, HasSubstr("vllm:num_preemptions_total" + l + "} 7\n"));
  EXPECT_THAT(t, HasSubstr("vllm:prompt_tokens_total" + l + "} 12\n"));
  EXPECT_THAT(t, HasSubstr("vllm:generation_tokens_total" + l + "} 5\n"));
  EXPECT_THAT(t, HasSubstr("vllm:request_success_total" + l + ",finished_reason=\"length\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("vllm:request_success_total" + l + ",finished_reason=\"abort\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("vllm:e2e_request_latency_seconds_count" + l + "} 3\n"));
  EXPECT_THAT(t, HasSubstr("vllm:e2e_request_latency_seconds_bucket" + l + ",le=\"1\"} 2\n"));
  EXPECT_THAT(t, HasSubstr("vllm:request_queue_time_seconds_count" + l + "} 1\n"));
  EXPECT_THAT(t, HasSubstr("vllm:time_to_first_token_seconds_count" + l + "} 1\n"));
  EXPECT_THAT(t, HasSubstr("vllm:inter_token_latency_seconds_count" + l + "} 1\n"));
  EXPECT_THAT(t, HasSubstr("vllm:time_per_output_token_seconds_count" + l + "} 1\n"));
  EXPECT_THAT(t, HasSubstr("# TYPE vllm:e2e_request_latency_seconds histogram\n"));
}

}  // namespace
}  // namespace qmpi
