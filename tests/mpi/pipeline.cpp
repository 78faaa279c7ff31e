// The Executor's pipeline on the real mesh (CPU backend, synthetic weights): steps submitted
// together, up to depth() in flight, must give what the same steps give one at a time, and
// shutdown() with steps still in flight must end every rank cleanly (their results dropped).
//   mpirun -np 3 mpitest_pipeline --model-config DIR/config.json --pp 3 [--tp T]
// Rank 0 prints "pipeline OK: <steps> steps, <depth> in flight" when both held.
#include <cstdio>
#include <string>
#include <vector>

#include "core/errors.h"
#include "synthetic_engine.h"

namespace qmpi {
namespace {

constexpr int kBlockSize = 16;

// A prefill of sequence `id` (its own blocks, 20 + id tokens) that samples greedily.
StepPlan prefill(int64_t id) {
  StepSeq s;
  s.id = id;
  s.first_chunk = true;
  s.sampling.temperature = 0.0f;
  for (int i = 0; i < 20 + int(id); ++i) s.tokens.push_back(int32_t((id * 37 + i * 11) % 900));
  s.block_table = {int32_t(2 * id), int32_t(2 * id + 1)};
  StepPlan p;
  p.seqs.push_back(s);
  return p;
}

int drive(Executor& ex) {
  const int depth = ex.depth();
  if (depth < 2) raise(Err::Usage, "give --pp 2 or more: nothing to pipeline");
  std::vector<int32_t> together, alone;
  for (int i = 0; i < depth; ++i) ex.submit(prefill(i));
  if (ex.in_flight() != size_t(depth)) raise(Err::Internal, "steps in flight went missing");
  for (int i = 0; i < depth; ++i) together.push_back(ex.collect().tokens.at(0));
  for (int i = 0; i < depth; ++i) alone.push_back(ex.step(prefill(i)).tokens.at(0));
  if (together != alone)
    raise(Err::Internal, "steps in flight together sampled other tokens than one at a time");
  for (int i = 0; i < depth; ++i) ex.submit(prefill(i));  // left in flight for shutdown()
  std::printf("pipeline OK: %d steps, %d in flight\n", 3 * depth, depth);
  std::fflush(stdout);
  return 0;
}

int run(const mpitest::EngineArgs& args) {
  EngineConfig o = mpitest::synthetic_cpu_engine(args);
  o.cache.block_size = kBlockSize;
  o.cache.max_model_len = 2 * kBlockSize;
  o.scheduler.max_num_seqs = 8;
  return run_engine(o, [](Engine& engine) { return drive(engine.executor()); });
}

}  // namespace
}  // namespace qmpi

int main(int argc, char** argv) {
  return qmpi::mpitest::run_main(
      [&] { return qmpi::run(qmpi::mpitest::parse_engine_args(argc, argv)); });
}
