// qmpi bench: prefill and decode throughput of one sequence on the whole mesh, the share of
// step time spent communicating, and decode as a fraction of the machine's read bandwidth
// (decode streams every weight byte once per token, so bandwidth is its roofline).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "app/commands/options.h"
#include "kernels/cpu/membw.h"
#include "requests/generate.h"

namespace qmpi {

int cmd_bench(const Args& args) {
  EngineCli cli;
  int64_t prompt_len = 128, gen_len = 64;
  int repeats = 3;
  bool json = false, skip_membw = false;
  po::options_description desc = engine_options(cli);
  desc.add_options()("prompt-len", po::value(&prompt_len)->default_value(128), "prompt tokens")(
      "gen-len", po::value(&gen_len)->default_value(64), "generated tokens")(
      "repeats", po::value(&repeats)->default_value(3), "runs; the best is reported")(
      "no-membw", po::bool_switch(&skip_membw), "skip the memory-bandwidth measurement")(
      "json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi bench --model DIR [--prompt-len N --gen-len N]"))
    return 0;
  if (prompt_len < 1 || gen_len < 2 || repeats < 1)
    raise(Err::Usage, "--prompt-len >= 1, --gen-len >= 2 and --repeats >= 1 are required");
  if (cli.max_model_len == 0) cli.max_model_len = prompt_len + gen_len;

  cli.command = "bench";
  return run_engine(to_engine_options(cli), [&](Engine& engine) {
    // Memory bandwidth first, alone on the machine (the other ranks wait in a broadcast).
    const double membw =
        skip_membw ? 0.0 : cpu::read_bandwidth(cpu::MembwOptions{size_t(1) << 30, cli.threads, 5});

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
    for (int r = 0; r < repeats; ++r) {
      engine.executor().reset_times();
      const GenerateResult res = generate(engine.executor(), engine.blocks(), req);
      const StepTimes& t = engine.executor().times();
      best_prefill = std::min(best_prefill, res.prefill_s);
      if (res.decode_s < best_decode) {
        best_decode = res.decode_s;
        comm_share = t.total_s > 0 ? t.comm_s / t.total_s : 0.0;
      }
    }
    const double prefill_tps = double(prompt_len) / best_prefill;
    const double decode_tps = double(gen_len - 1) / best_decode;
    // Rank 0's weight bytes equal the per-token stream only on one rank; the mesh-wide figure
    // is what the slowest rank streams, which the table states per layout.
    const double bytes_per_token = double(engine.weight_bytes());
    const double decode_bw = bytes_per_token * decode_tps;
    // Prefill work: every layer's linear maps on every prompt token, plus lm_head on the last
    // one (the logits of the other positions are not computed); attention is left out.
    const ModelConfig& c = engine.config();
    const double layer_params = double(c.hidden_size) * double(c.q_width() + 2 * c.kv_width()) +
                                double(c.q_width()) * double(c.hidden_size) +
                                3.0 * double(c.hidden_size) * double(c.intermediate_size);
    const double prefill_flops = 2.0 * layer_params * double(c.num_layers) * double(prompt_len) +
                                 2.0 * double(c.vocab_size) * double(c.hidden_size);
    const double prefill_gflops = prefill_flops / best_prefill / 1e9;
    const auto& m = engine.mesh_layout();
    if (json) {
      nlohmann::json j{{"tp", m.tp},
                       {"pp", m.pp},
                       {"threads", cli.threads},
                       {"prompt_len", prompt_len},
                       {"gen_len", gen_len},
                       {"prefill_tokens_per_s", prefill_tps},
                       {"decode_tokens_per_s", decode_tps},
                       {"comm_fraction_of_step", comm_share},
                       {"weight_bytes_rank0", engine.weight_bytes()},
                       {"membw_bytes_per_s", membw},
                       {"decode_fraction_of_membw", membw > 0 ? decode_bw / membw : 0.0},
                       {"prefill_gflops", prefill_gflops}};
      std::cout << j.dump() << std::endl;
    } else {
      std::printf("layout            tp %d x pp %d, %d thread(s) per rank\n", m.tp, m.pp,
                  cli.threads);
      std::printf(
          "prefill           %.1f tokens/s (%lld-token prompt), %.1f GFLOP/s (whole mesh)\n",
          prefill_tps, (long long)prompt_len, prefill_gflops);
      std::printf("decode            %.2f tokens/s (%.1f ms/token)\n", decode_tps,
                  1e3 / decode_tps);
      std::printf("communication     %.1f%% of step time\n", 100.0 * comm_share);
      if (membw > 0)
        std::printf(
            "memory bandwidth  %.2f GB/s read; decode streams %.1f MB/token = %.1f%% of it\n",
            membw / 1e9, bytes_per_token / 1e6, 100.0 * decode_bw / membw);
    }
    return 0;
  });
}

}  // namespace qmpi
