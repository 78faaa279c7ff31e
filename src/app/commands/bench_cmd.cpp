// qmpi bench: prefill and decode throughput on the whole mesh, the share of step time spent
// communicating, and decode as a fraction of the machine's read bandwidth (decode streams every
// weight byte, plus the KV cache it attends over, once per step, so bandwidth is its roofline;
// on an MoE model only the routed experts' bytes count, the active share of the weights).
// With --batch B, B sequences decode together and the figure of merit is the step time.
// With --context N, decode starts with N tokens in the cache (see fill_context below).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "app/commands/options.h"
#include "core/errors.h"
#include "kernels/cpu/membw.h"
#include "kernels/kv_dtype.h"
#include "plan/param_counts.h"
#include "requests/generate.h"

namespace qmpi {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct BatchedTimes {
  double prefill_s = 1e30;  // best mean time of one sequence's prompt step
  double step_s = 1e30;     // best mean decode step
};

// B sequences, each prefilled alone, then decoded together for `steps` steps: the serving
// case. Each prompt sits after `filled` positions that count as a cached prefix whose K/V
// blocks are never computed (the fast fill of --context: the KV cache starts zeroed and the
// attention kernels read every key whatever its value, so a step over them costs what a step
// over a prefilled context does). With `guesses` > 0 each decode step is a speculative one that
// checks that many guessed tokens per sequence (copies of its last token: what they are does not
// change what the step costs). Best over `repeats`.
BatchedTimes batched_times(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                           int32_t filled, int64_t steps, int repeats, int32_t guesses = 0) {
  Executor& ex = engine.executor();
  BlockManager& blocks = engine.blocks();
  BatchedTimes best;
  for (int r = 0; r < repeats; ++r) {
    const size_t B = prompts.size();
    std::vector<std::vector<int32_t>> tables(B);
    std::vector<int32_t> last(B), pos(B);
    const auto t_prefill = std::chrono::steady_clock::now();
    for (size_t i = 0; i < B; ++i) {
      const int64_t len = int64_t(prompts[i].size());
      if (!blocks.ensure(tables[i], filled + len + steps * (1 + guesses) + 1))
        raise(Err::Usage, "the KV cache holds too few blocks for --batch sequences",
              "Lower --batch, --context, --prompt-len or --gen-len.");
      StepSeq s;
      s.id = int64_t(i);
      s.start_pos = filled;
      s.cached_prefix.assign(size_t(filled), 0);
      s.tokens = prompts[i];
      s.block_table = tables[i];
      s.first_chunk = true;
      s.sampling.temperature = 0.0f;
      StepPlan plan;
      plan.seqs.push_back(std::move(s));
      last[i] = ex.step(plan).tokens.at(0);
      pos[i] = int32_t(filled + len);
    }
    best.prefill_s = std::min(best.prefill_s, seconds_since(t_prefill) / double(B));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < steps; ++k) {
      StepPlan plan;
      for (size_t i = 0; i < B; ++i) {
        StepSeq s;
        s.id = int64_t(i);
        s.start_pos = pos[i];
        s.tokens.assign(size_t(1 + guesses), last[i]);
        s.draft = guesses;
        s.block_table = tables[i];
        s.sampling.temperature = 0.0f;
        s.sample_index = uint32_t(k + 1);
        plan.seqs.push_back(std::move(s));
      }
      const StepResult res = ex.step(plan);
      for (size_t i = 0, at = 0; i < B; ++i) {
        // The accepted guesses and the sampled token join the sequence.
        at += size_t(res.counts.at(i));
        last[i] = res.tokens.at(at - 1);
        pos[i] += res.counts[i];
      }
    }
    best.step_s = std::min(best.step_s, seconds_since(t0) / double(steps));
    StepPlan done;
    for (size_t i = 0; i < B; ++i) done.finished.push_back(int64_t(i));
    ex.step(done);
    for (auto& t : tables) blocks.release(t);
  }
  return best;
}

}  // namespace

int cmd_bench(const Args& args) {
  EngineConfig config = engine_config_for(Command::Bench);
  int64_t prompt_len = 128, gen_len = 64, batch = 1, membw_mib = 2048, context = 0;
  int repeats = 3;
  bool json = false, skip_membw = false;
  std::string speculative;
  po::options_description desc = engine_options(config);
  desc.add_options()("prompt-len", po::value(&prompt_len)->default_value(128), "prompt tokens")(
      "gen-len", po::value(&gen_len)->default_value(64), "generated tokens")(
      "repeats", po::value(&repeats)->default_value(3), "runs; the best is reported")(
      "batch", po::value(&batch)->default_value(1),
      "sequences decoding together (each prefilled alone first); the step time is reported")(
      "context", po::value(&context)->default_value(0),
      "tokens in the KV cache when decode starts (0: --prompt-len). Above --prompt-len the "
      "prompt sits after context - prompt-len positions of zeroed K/V that are attended as a "
      "cached prefix, never prefilled (a fast fill: a CPU would need minutes to prefill 16k "
      "tokens, and attention reads every key whatever its value)")(
      "membw-mib", po::value(&membw_mib)->default_value(2048),
      "MiB the bandwidth probe reads per pass (keep it many times the last-level cache)")(
      "no-membw", po::bool_switch(&skip_membw), "skip the memory-bandwidth measurement")(
      "json", po::bool_switch(&json), "print one JSON object")(
      "speculative-config", po::value(&speculative),
      "also time decode steps that check num_speculative_tokens guesses per sequence (the "
      "cost of speculation; vLLM's JSON, e.g. '{\"method\": \"ngram\", "
      "\"num_speculative_tokens\": 4}')");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi bench --model DIR [--prompt-len N --gen-len N]"))
    return 0;
  if (prompt_len < 1 || gen_len < 2 || repeats < 1 || batch < 1 || membw_mib < 1)
    raise(Err::Usage,
          "--prompt-len >= 1, --gen-len >= 2, --repeats >= 1, --batch >= 1 and --membw-mib >= 1 "
          "are required");
  if (context == 0) context = prompt_len;
  if (context < prompt_len)
    raise(Err::Usage, "--context " + std::to_string(context) + " is shorter than --prompt-len " +
                          std::to_string(prompt_len));
  const int32_t filled = int32_t(context - prompt_len);
  const int32_t guesses = parse_speculative_config(speculative).num_tokens;
  if (config.cache.max_model_len == 0)
    config.cache.max_model_len = context + gen_len * (1 + guesses) + 1;
  config.scheduler.max_num_seqs = std::max<int64_t>(config.scheduler.max_num_seqs, batch);

  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) {
    // Memory bandwidth first, alone on the machine (the other ranks wait in a broadcast).
    // The probe reads the way decode does: a buffer of several GB, each byte once per pass, so
    // that nothing comes from cache; the median pass is reported beside the best, as a plain
    // STREAM read would be (bench/stream_read.c is that yardstick).
    cpu::MembwStats membw_stats;
    if (!skip_membw)
      membw_stats = cpu::read_bandwidth_stats(
          cpu::MembwOptions{size_t(membw_mib) << 20, config.backend.threads, 5});
    const double membw = membw_stats.median;

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(0, 151642);
    GenerateRequest req;
    for (int64_t i = 0; i < prompt_len; ++i) req.prompt.push_back(tok(rng));
    req.max_tokens = gen_len;
    req.sampling.temperature = 0.0f;

    GenerateRequest warm = req;
    warm.max_tokens = 2;
    generate(engine.executor(), engine.blocks(), warm);

    double best_prefill = 1e30, best_decode = 1e30, comm_share = 0.0;
    for (int r = 0; r < repeats && filled == 0; ++r) {
      engine.executor().reset_times();
      const GenerateResult res = generate(engine.executor(), engine.blocks(), req);
      const StepTimes& t = engine.executor().times();
      best_prefill = std::min(best_prefill, res.prefill_s);
      if (res.decode_s < best_decode) {
        best_decode = res.decode_s;
        comm_share = t.total_s > 0 ? t.comm_s / t.total_s : 0.0;
      }
    }
    if (filled > 0) {
      engine.executor().reset_times();
      const BatchedTimes bt = batched_times(engine, {req.prompt}, filled, gen_len - 1, repeats);
      best_prefill = bt.prefill_s;
      best_decode = bt.step_s * double(gen_len - 1);
      const StepTimes& t = engine.executor().times();
      comm_share = t.total_s > 0 ? t.comm_s / t.total_s : 0.0;
    }
    const double prefill_tps = double(prompt_len) / best_prefill;
    const double decode_tps = double(gen_len - 1) / best_decode;
    const ModelConfig& c = engine.config();
    // Rank 0's weight bytes equal the per-token stream only on one rank; the mesh-wide figure
    // is what the slowest rank streams, which the table states per layout. Each decode step
    // also reads the sequence's K and V (in the cache's dtype) at its mean context over the run.
    const DType kv_dtype = engine.options().cache.kv_dtype;
    const double kv_bytes_per_token = double(c.num_layers) * 2.0 * double(c.num_kv_heads) *
                                      double(kv_vector_bytes(kv_dtype, c.head_dim)) *
                                      (double(context) + double(gen_len) / 2.0);
    // An MoE token reads k of the experts: scale the weights by the active share of the
    // parameters (1 on dense models).
    const ParamCounts params = param_counts(c);
    const double active_share = double(params.active) / double(params.total);
    const double active_weight_bytes = double(engine.weight_bytes()) * active_share;
    const double bytes_per_token = active_weight_bytes + kv_bytes_per_token;
    const double decode_bw = bytes_per_token * decode_tps;

    // Batched decode: B sequences at the same context, one step per token of each.
    double step1_s = 1.0 / decode_tps, stepB_s = 0.0;
    if (batch > 1) {
      std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch), std::vector<int32_t>{});
      for (auto& p : prompts)
        for (int64_t i = 0; i < prompt_len; ++i) p.push_back(tok(rng));
      stepB_s = batched_times(engine, prompts, filled, gen_len - 1, repeats).step_s;
    }
    // A step that checks `guesses` guesses per sequence, against the plain step (batch 1 and
    // --batch): both read the weights once; the extra rows cost compute and attention.
    double plain1_s = 0.0, verify1_s = 0.0, verifyB_s = 0.0;
    if (guesses > 0) {
      plain1_s = batched_times(engine, {req.prompt}, filled, gen_len - 1, repeats).step_s;
      verify1_s = batched_times(engine, {req.prompt}, filled, gen_len - 1, repeats, guesses).step_s;
      if (batch > 1) {
        std::vector<std::vector<int32_t>> prompts(size_t(batch), req.prompt);
        verifyB_s = batched_times(engine, prompts, filled, gen_len - 1, repeats, guesses).step_s;
      }
    }
    // Prefill work: every active parameter but the embedding and lm_head on every prompt token
    // (the layers' linear maps, routed experts only), plus lm_head on the last one (the logits
    // of the other positions are not computed); attention is left out.
    const double vocab_params = double(c.vocab_size) * double(c.hidden_size);
    const double layer_params =
        double(params.active) - vocab_params * (c.tie_word_embeddings ? 1.0 : 2.0);
    const double prefill_flops = 2.0 * layer_params * double(prompt_len) + 2.0 * vocab_params;
    const double prefill_gflops = prefill_flops / best_prefill / 1e9;
    const auto& m = engine.mesh_layout();
    if (json) {
      nlohmann::json j{{"tp", m.tp},
                       {"pp", m.pp},
                       {"threads", config.backend.threads},
                       {"prompt_len", prompt_len},
                       {"context", context},
                       {"kv_dtype", kv_dtype_name(kv_dtype)},
                       {"gen_len", gen_len},
                       {"batch", batch},
                       {"prefill_tokens_per_s", prefill_tps},
                       {"decode_tokens_per_s", decode_tps},
                       {"decode_step_ms", 1e3 * step1_s},
                       {"comm_fraction_of_step", comm_share},
                       {"weight_bytes_rank0", engine.weight_bytes()},
                       {"active_weight_bytes_rank0", active_weight_bytes},
                       {"kv_bytes_per_token", kv_bytes_per_token},
                       {"membw_bytes_per_s", membw},
                       {"membw_best_bytes_per_s", membw_stats.best},
                       {"membw_probe_mib", skip_membw ? 0 : membw_mib},
                       {"decode_fraction_of_membw", membw > 0 ? decode_bw / membw : 0.0},
                       {"prefill_gflops", prefill_gflops}};
      if (batch > 1) {
        j["batch_step_ms"] = 1e3 * stepB_s;
        j["batch_tokens_per_s"] = double(batch) / stepB_s;
        j["batch_step_vs_single"] = stepB_s / step1_s;
      }
      if (guesses > 0) {
        j["spec_tokens"] = guesses;
        j["verify_step_ms"] = 1e3 * verify1_s;
        j["plain_step_ms"] = 1e3 * plain1_s;
        j["verify_vs_decode_step"] = verify1_s / plain1_s;
        // Every guess accepted (a self-draft): guesses + 1 tokens per verification step.
        j["spec_upper_bound_tokens_per_s"] = double(1 + guesses) / verify1_s;
        if (batch > 1) {
          j["batch_verify_step_ms"] = 1e3 * verifyB_s;
          j["batch_verify_vs_batch_step"] = verifyB_s / stepB_s;
        }
      }
      std::cout << j.dump() << std::endl;
    } else {
      std::printf("layout            tp %d x pp %d, %d thread(s) per rank\n", m.tp, m.pp,
                  config.backend.threads);
      std::printf(
          "prefill           %.1f tokens/s (%lld-token prompt), %.1f GFLOP/s (whole mesh)\n",
          prefill_tps, (long long)prompt_len, prefill_gflops);
      std::printf("decode            %.2f tokens/s (%.1f ms/token) at context %lld, %s KV\n",
                  decode_tps, 1e3 / decode_tps, (long long)context, kv_dtype_name(kv_dtype));
      std::printf("communication     %.1f%% of step time\n", 100.0 * comm_share);
      if (batch > 1)
        std::printf("batch %-11lld %.1f ms/step = %.2fx the 1-sequence step, %.1f tokens/s\n",
                    (long long)batch, 1e3 * stepB_s, stepB_s / step1_s, double(batch) / stepB_s);
      if (guesses > 0) {
        std::printf(
            "speculation       a step checking %d guesses: %.1f ms = %.2fx a decode step; "
            "every guess accepted: %.1f tokens/s\n",
            guesses, 1e3 * verify1_s, verify1_s / plain1_s, double(1 + guesses) / verify1_s);
        if (batch > 1)
          std::printf("  batch %-9lld %.1f ms = %.2fx its plain step\n", (long long)batch,
                      1e3 * verifyB_s, verifyB_s / stepB_s);
      }
      if (membw > 0)
        std::printf(
            "memory bandwidth  %.2f GB/s read (median of 5 passes over %lld MiB; best %.2f); "
            "decode streams %.1f MB/token = %.1f%% of it\n",
            membw / 1e9, (long long)membw_mib, membw_stats.best / 1e9, bytes_per_token / 1e6,
            100.0 * decode_bw / membw);
    }
    return 0;
  });
}

}  // namespace qmpi
