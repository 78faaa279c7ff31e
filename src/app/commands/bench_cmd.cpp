// qmpi bench: prefill and decode throughput on the whole mesh, measured with requests sent through
// the request pipeline and the scheduler that serve and batch use (requests/bench_runs.h); the
// share of step time spent communicating; and decode as a fraction of the machine's read
// bandwidth (decode streams every weight byte, plus the KV cache it attends over, once per step,
// so bandwidth is its roofline; on an MoE model only the routed experts' bytes count, the active
// share of the weights). With --batch 1,4,16 the decode runs again with that many sequences
// decoding together, and the figure of merit is the step time. With --context N every sequence's
// prompt follows N - prompt-len shared tokens, prefilled once and then served by the prefix cache.
// With --lora-modules the sequences of each decode run the adapters in turn (bench/lora_bench.sh).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/commands/lora_options.h"
#include "app/commands/options.h"
#include "core/errors.h"
#include "engine/replica_scheduler.h"
#include "kernels/cpu/membw.h"
#include "kernels/kv_dtype.h"
#include "plan/param_counts.h"
#include "requests/bench_runs.h"
#include "requests/model_tokenizer.h"

namespace qmpi {
namespace {

struct BenchOptions {
  int64_t prompt_len = 128, gen_len = 64, membw_mib = 2048, context = 0;
  int repeats = 3;
  bool json = false, skip_membw = false;
  std::string batch_list = "1";
  std::vector<int64_t> batches;  // from batch_list: 1 first, then the others ascending
};

po::options_description bench_options(BenchOptions& o) {
  po::options_description d("bench");
  d.add_options()("prompt-len", po::value(&o.prompt_len)->default_value(128), "prompt tokens")(
      "gen-len", po::value(&o.gen_len)->default_value(64), "generated tokens per sequence")(
      "repeats", po::value(&o.repeats)->default_value(3), "runs; the best is reported")(
      "batch", po::value(&o.batch_list)->default_value("1"),
      "sequences decoding together, a comma-separated list, e.g. 1,4,16,32,64 (1 is always "
      "measured); each is sent as that many requests at once and timed once all decode")(
      "context", po::value(&o.context)->default_value(0),
      "tokens in the KV cache when decode starts (0: --prompt-len). Above --prompt-len every "
      "prompt starts with the same context - prompt-len tokens, prefilled once and then read "
      "from the prefix cache")(
      "membw-mib", po::value(&o.membw_mib)->default_value(2048),
      "MiB the bandwidth probe reads per pass (keep it many times the last-level cache)")(
      "no-membw", po::bool_switch(&o.skip_membw), "skip the memory-bandwidth measurement")(
      "json", po::bool_switch(&o.json), "print one JSON object");
  return d;
}

std::vector<int64_t> parse_batches(const std::string& list) {
  if (list.empty()) raise(Err::Usage, "--batch is empty", "Give e.g. --batch 1,4,16,32,64");
  std::vector<int64_t> out{1};
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1)
      raise(Err::Usage, "--batch: '" + item + "' is not a positive number of sequences",
            "Give a comma-separated list, e.g. --batch 1,4,16,32,64");
    out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Checks the options and sizes the engine for them: room for the largest batch, and (unless
// given) a max_model_len that fits a bench sequence, which keeps the KV cache small.
void check_bench_options(BenchOptions& o, EngineConfig& config) {
  if (o.prompt_len < 1 || o.gen_len < 2 || o.repeats < 1 || o.membw_mib < 1)
    raise(Err::Usage,
          "--prompt-len >= 1, --gen-len >= 2, --repeats >= 1 and --membw-mib >= 1 are required");
  o.batches = parse_batches(o.batch_list);
  if (o.context == 0) o.context = o.prompt_len;
  if (o.context < o.prompt_len)
    raise(Err::Usage, "--context " + std::to_string(o.context) + " is shorter than --prompt-len " +
                          std::to_string(o.prompt_len));
  SchedulerConfig& s = config.scheduler;
  // Verification steps run on replica 0's own scheduler, which would leave the other replicas
  // without a step (or a keep-alive) for as long as they take.
  if (s.speculative.enabled() && config.parallel.layout.dp > 1)
    raise(Err::Usage, "--speculative-config times verification steps on one mesh, not with --dp",
          "Drop --dp (launch --tp x --pp ranks) to time speculation.");
  const int64_t largest = o.batches.back();
  s.max_num_seqs = std::max(s.max_num_seqs, largest);
  const int64_t budget = s.max_batched_tokens > 0 ? s.max_batched_tokens : o.context;
  if (config.cache.max_model_len == 0)
    config.cache.max_model_len =
        o.context + bench_max_tokens(largest, o.context, o.gen_len, budget) + 1;
}

// The best of `repeats` decodes of `batch` sequences (the shortest step).
DecodeTiming best_decode(BenchRunner& runner, int64_t batch, const std::vector<int32_t>& prefix,
                         const BenchOptions& o) {
  DecodeTiming best;
  for (int r = 0; r < o.repeats; ++r) {
    const DecodeTiming t = runner.decode(batch, prefix, o.prompt_len, o.gen_len);
    if (r == 0 || t.step_s() < best.step_s()) best = t;
  }
  return best;
}

struct BenchResults {
  cpu::MembwStats membw;
  double prefill_s = 1e30;            // best time to the first token of a --prompt-len prompt
  std::vector<DecodeTiming> decodes;  // per --batch entry, batch 1 first
  double comm_share = 0.0;            // of batch 1's steps
  int32_t guesses = 0;                // --speculative-config's, 0 without
  DecodeTiming verify1, verifyB;      // steps checking `guesses` guesses per sequence
};

// Prefill, then decode at every batch size, on serve's scheduler (all --dp replicas).
void measure_plain(Engine& engine, const ModelFacts& model, int64_t vocab, const BenchOptions& o,
                   BenchResults& res) {
  SchedulerConfig cfg = engine.scheduler_config();
  cfg.speculative = {};
  ReplicaScheduler sched(engine.replica_runners(), engine.replica_blocks(), cfg,
                         engine.options().parallel.comm_timeout_s / 4);
  BenchRunner runner(sched, model, vocab, 1234);
  runner.use_adapters(model.adapter_names);  // --lora-modules: the sequences take them in turn
  // A context prefix, prefilled once here; the prefix cache serves it from then on.
  const std::vector<int32_t> prefix = runner.random_prompt(o.context - o.prompt_len);
  if (!prefix.empty()) runner.time_to_first_token(prefix);
  runner.decode(1, prefix, o.prompt_len, 2);  // warm-up
  for (int r = 0; r < o.repeats; ++r)
    res.prefill_s =
        std::min(res.prefill_s, runner.time_to_first_token(runner.random_prompt(o.prompt_len)));
  engine.executor().reset_times();
  res.decodes.push_back(best_decode(runner, 1, prefix, o));
  const StepTimes& t = engine.executor().times();
  res.comm_share = t.total_s > 0 ? t.comm_s / t.total_s : 0.0;
  for (size_t i = 1; i < o.batches.size(); ++i)
    res.decodes.push_back(best_decode(runner, o.batches[i], prefix, o));
}

// Steps that check `guesses` guessed tokens per sequence, on replica 0's own scheduler (serve's
// proposer guesses only where the text repeats; here every decode step carries the guesses).
void measure_verify(Engine& engine, const ModelFacts& model, int64_t vocab, const BenchOptions& o,
                    BenchResults& res) {
  res.guesses = engine.options().scheduler.speculative.num_tokens;
  if (res.guesses == 0) return;
  SchedulerConfig cfg = engine.scheduler_config();
  Scheduler sched(*engine.replica_runners().at(0), *engine.replica_blocks().at(0), cfg,
                  std::make_shared<RepeatLastToken>(res.guesses));
  BenchRunner runner(sched, model, vocab, 4321);
  const std::vector<int32_t> prefix = runner.random_prompt(o.context - o.prompt_len);
  if (!prefix.empty()) runner.time_to_first_token(prefix);
  res.verify1 = best_decode(runner, 1, prefix, o);
  if (o.batches.size() > 1) res.verifyB = best_decode(runner, o.batches.back(), prefix, o);
}

// Figures derived from the timings and the model's sizes.
struct BenchFigures {
  double prefill_tps = 0, decode_tps = 0, step1_s = 0, prefill_gflops = 0;
  double kv_bytes_per_token = 0, active_weight_bytes = 0, bytes_per_token = 0, decode_bw = 0;
};

BenchFigures bench_figures(const Engine& engine, const BenchOptions& o, const BenchResults& r) {
  BenchFigures f;
  const ModelConfig& c = engine.config();
  f.prefill_tps = double(o.prompt_len) / r.prefill_s;
  f.decode_tps = r.decodes.front().tokens_per_s();
  f.step1_s = r.decodes.front().step_s();
  // Rank 0's weight bytes equal the per-token stream only on one rank; the mesh-wide figure
  // is what the slowest rank streams, which the table states per layout. Each decode step
  // also reads the sequence's K and V (in the cache's dtype) at its mean context over the run.
  f.kv_bytes_per_token = double(c.num_layers) * 2.0 * double(c.num_kv_heads) *
                         double(kv_vector_bytes(engine.options().cache.kv_dtype, c.head_dim)) *
                         (double(o.context) + double(o.gen_len) / 2.0);
  // An MoE token reads k of the experts: scale the weights by the active share of the
  // parameters (1 on dense models).
  const ParamCounts params = param_counts(c);
  f.active_weight_bytes =
      double(engine.weight_bytes()) * double(params.active) / double(params.total);
  f.bytes_per_token = f.active_weight_bytes + f.kv_bytes_per_token;
  f.decode_bw = f.bytes_per_token * f.decode_tps;
  // Prefill work: every active parameter but the embedding and lm_head on every prompt token
  // (the layers' linear maps, routed experts only), plus lm_head on the last one (the logits
  // of the other positions are not computed); attention is left out.
  const double vocab_params = double(c.vocab_size) * double(c.hidden_size);
  const double layer_params =
      double(params.active) - vocab_params * (c.tie_word_embeddings ? 1.0 : 2.0);
  const double prefill_flops = 2.0 * layer_params * double(o.prompt_len) + 2.0 * vocab_params;
  f.prefill_gflops = prefill_flops / r.prefill_s / 1e9;
  return f;
}

nlohmann::json batch_rows(const BenchOptions& o, const BenchResults& r) {
  nlohmann::json rows = nlohmann::json::array();
  const double step1 = r.decodes.front().step_s();
  for (const DecodeTiming& d : r.decodes)
    rows.push_back({{"batch", d.batch},
                    {"prefill_tokens_per_s", double(d.batch * o.prompt_len) / d.prefill_s},
                    {"decode_tokens_per_s", d.tokens_per_s()},
                    {"step_ms", 1e3 * d.step_s()},
                    {"step_vs_single", d.step_s() / step1},
                    {"preemptions", d.preemptions}});
  return rows;
}

void add_speculation(nlohmann::json& j, const BenchResults& r) {
  const double plain1 = r.decodes.front().step_s(), verify1 = r.verify1.step_s();
  j["spec_tokens"] = r.guesses;
  j["verify_step_ms"] = 1e3 * verify1;
  j["plain_step_ms"] = 1e3 * plain1;
  j["verify_vs_decode_step"] = verify1 / plain1;
  // Every guess accepted (a self-draft): guesses + 1 tokens per verification step.
  j["spec_upper_bound_tokens_per_s"] = double(1 + r.guesses) / verify1;
  if (r.decodes.size() > 1) {
    j["batch_verify_step_ms"] = 1e3 * r.verifyB.step_s();
    j["batch_verify_vs_batch_step"] = r.verifyB.step_s() / r.decodes.back().step_s();
  }
}

void print_json(const Engine& engine, const BenchOptions& o, const BenchResults& r,
                const BenchFigures& f) {
  const auto& m = engine.mesh_layout();
  const double membw = r.membw.median;
  nlohmann::json j{{"tp", m.tp},
                   {"pp", m.pp},
                   {"dp", m.dp},
                   {"threads", engine.options().backend.threads},
                   {"prompt_len", o.prompt_len},
                   {"context", o.context},
                   {"kv_dtype", kv_dtype_name(engine.options().cache.kv_dtype)},
                   {"gen_len", o.gen_len},
                   {"batch", r.decodes.back().batch},
                   {"prefill_tokens_per_s", f.prefill_tps},
                   {"decode_tokens_per_s", f.decode_tps},
                   {"decode_step_ms", 1e3 * f.step1_s},
                   {"comm_fraction_of_step", r.comm_share},
                   {"weight_bytes_rank0", engine.weight_bytes()},
                   {"active_weight_bytes_rank0", f.active_weight_bytes},
                   {"kv_bytes_per_token", f.kv_bytes_per_token},
                   {"membw_bytes_per_s", membw},
                   {"membw_best_bytes_per_s", r.membw.best},
                   {"membw_probe_mib", o.skip_membw ? 0 : o.membw_mib},
                   {"decode_fraction_of_membw", membw > 0 ? f.decode_bw / membw : 0.0},
                   {"prefill_gflops", f.prefill_gflops},
                   {"batches", batch_rows(o, r)}};
  if (r.decodes.size() > 1) {  // the largest batch, as the scripts read it
    const DecodeTiming& b = r.decodes.back();
    j["batch_step_ms"] = 1e3 * b.step_s();
    j["batch_tokens_per_s"] = b.tokens_per_s();
    j["batch_step_vs_single"] = b.step_s() / f.step1_s;
  }
  if (r.guesses > 0) add_speculation(j, r);
  std::cout << j.dump() << std::endl;
}

void print_text(const Engine& engine, const BenchOptions& o, const BenchResults& r,
                const BenchFigures& f) {
  const auto& m = engine.mesh_layout();
  std::printf("layout            tp %d x pp %d x dp %d, %d thread(s) per rank\n", m.tp, m.pp, m.dp,
              engine.options().backend.threads);
  std::printf("prefill           %.1f tokens/s (%lld-token prompt), %.1f GFLOP/s (whole mesh)\n",
              f.prefill_tps, (long long)o.prompt_len, f.prefill_gflops);
  std::printf("decode            %.2f tokens/s (%.1f ms/token) at context %lld, %s KV\n",
              f.decode_tps, 1e3 * f.step1_s, (long long)o.context,
              kv_dtype_name(engine.options().cache.kv_dtype));
  std::printf("communication     %.1f%% of step time\n", 100.0 * r.comm_share);
  if (r.decodes.size() > 1) {
    std::printf("batch  prefill tok/s  decode tok/s  ms/step  x 1-seq step  preemptions\n");
    for (const DecodeTiming& d : r.decodes)
      std::printf("%5lld  %13.1f  %12.1f  %7.1f  %12.2f  %11lld\n", (long long)d.batch,
                  double(d.batch * o.prompt_len) / d.prefill_s, d.tokens_per_s(), 1e3 * d.step_s(),
                  d.step_s() / f.step1_s, (long long)d.preemptions);
  }
  if (r.guesses > 0) {
    std::printf(
        "speculation       a step checking %d guesses: %.1f ms = %.2fx a decode step; "
        "every guess accepted: %.1f tokens/s\n",
        r.guesses, 1e3 * r.verify1.step_s(), r.verify1.step_s() / f.step1_s,
        double(1 + r.guesses) / r.verify1.step_s());
    if (r.decodes.size() > 1)
      std::printf("  batch %-9lld %.1f ms = %.2fx its plain step\n",
                  (long long)r.decodes.back().batch, 1e3 * r.verifyB.step_s(),
                  r.verifyB.step_s() / r.decodes.back().step_s());
  }
  if (r.membw.median > 0)
    std::printf(
        "memory bandwidth  %.2f GB/s read (median of 5 passes over %lld MiB; best %.2f); "
        "decode streams %.1f MB/token = %.1f%% of it\n",
        r.membw.median / 1e9, (long long)o.membw_mib, r.membw.best / 1e9, f.bytes_per_token / 1e6,
        100.0 * f.decode_bw / r.membw.median);
}

// Rank 0: the measurements and the report. The pipeline gets the model's tokenizer when it has
// one (outputs are detokenized as serve's are); prompt ids are drawn below the vocabulary both
// the embedding and the tokenizer know.
int run_bench(Engine& engine, const EngineConfig& config, const BenchOptions& o) {
  BenchResults res;
  // Memory bandwidth first, alone on the machine (the other ranks wait in a broadcast).
  // The probe reads the way decode does: a buffer of several GB, each byte once per pass, so
  // that nothing comes from cache; the median pass is reported beside the best, as a plain
  // STREAM read would be (bench/stream_read.c is that yardstick).
  if (!o.skip_membw)
    res.membw = cpu::read_bandwidth_stats(
        cpu::MembwOptions{size_t(o.membw_mib) << 20, config.backend.threads, 5});
  const std::shared_ptr<const Tokenizer> tokenizer = find_model_tokenizer(config.model.files());
  if (tokenizer) engine.executor().set_valid_vocab(tokenizer->vocab_size());
  ModelFacts text;
  text.tokenizer = tokenizer.get();
  text.adapter_names = lora_names(config.lora);
  const ModelFacts model = ModelFacts::from(engine, text);
  const int64_t vocab =
      tokenizer ? std::min<int64_t>(model.vocab_size, tokenizer->vocab_size()) : model.vocab_size;
  measure_plain(engine, model, vocab, o, res);
  measure_verify(engine, model, vocab, o, res);
  const BenchFigures f = bench_figures(engine, o, res);
  if (o.json)
    print_json(engine, o, res, f);
  else
    print_text(engine, o, res, f);
  return 0;
}

}  // namespace

int cmd_bench(const Args& args) {
  EngineConfig config = engine_config_for(Command::Bench);
  BenchOptions o;
  po::options_description desc = engine_options(config);
  desc.add(bench_options(o));
  desc.add(scheduler_options(config));
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi bench --model DIR [--prompt-len N --gen-len N --batch 1,4,16]"))
    return 0;
  check_bench_options(o, config);
  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) { return run_bench(engine, config, o); });
}

}  // namespace qmpi
