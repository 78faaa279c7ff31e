#include <gtest/gtest.h>
#include <cstdio>
#include "plan/planner.h"
#include "plan/byte_size.h"
using namespace qmpi;
TEST(Explore, Print) {
  for (auto [mem, kv] : {std::pair{"80GB", DType::BF16}, {"24GiB", DType::BF16}, {"80GB", DType::F32}}) {
  auto cfg = ModelConfig::load(std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/qwen2.5-72b-instruct.json");
  PlanInputs in; in.gpus = 6; in.gpu_mem = parse_byte_size(mem, "--gpu-mem"); in.max_model_len = 32768; in.kv_dtype = kv;
  auto r = plan_layouts(cfg, in);
  for (auto& v : r.layouts) {
    if (!v.valid) { printf("tp%d pp%d invalid %s\n", v.layout.tp, v.layout.pp, v.reason.c_str()); continue; }
    auto& m = v.biggest_rank();
    printf("tp%d pp%d fits=%d w=%s kv=%s act=%s tot=%s budget=%s room=%ld\n", v.layout.tp, v.layout.pp, v.fits,
      format_gib(m.weights).c_str(), format_gib(m.kv_cache).c_str(), format_gib(m.activations).c_str(), format_gib(m.total()).c_str(), format_gib(v.budget).c_str(), v.kv_room_tokens);
  }
  printf("%s\n%s\n", r.recommendation.c_str(), r.command.c_str());
  for (auto& s : r.suggestions) printf("  * %s\n    %s\n", s.sentence.c_str(), s.command.c_str());
  }
}
