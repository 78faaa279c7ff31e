// The Executor's pipeline on the real mesh (CPU backend, synthetic weights): steps submitted
// together, up to depth() in flight, must give what the same steps give one at a time, and
// shutdown() with steps still in flight must end every rank cleanly (their results dropped).
//   mpirun -np 3 mpitest_pipeline --model-config DIR/config.json --pp 3 [--tp T]
// Rank 0 prints "pipeline OK: <steps> steps, <depth> in flight" when both held.
#include <cstdio>
#include <string>
#include <vector>

#include "app/commands/options.h"
#include "backend/cpu/cpu_backend.h"
#include "plan/errors.h"

namespace qmpi {
namespace {

struct Args {
  std::string model_config;
  Layout layout;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) raise(Err::Usage, k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--model-config")
      a.model_config = v;
    else if (k == "--tp")
      a.layout.tp = std::stoi(v);
    else if (k == "--pp")
      a.layout.pp = std::stoi(v);
    else
      raise(Err::Usage, "unknown option " + k);
  }
  return a;
}

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

int run(const Args& args) {
  EngineOptions o;
  o.synthetic_weights = true;
  o.model_config = args.model_config;
  o.layout = args.layout;
  o.comm_timeout_s = 60;
  o.block_size = kBlockSize;
  o.max_model_len = 2 * kBlockSize;
  o.max_num_seqs = 8;
  o.make_backend = [](int) { return make_cpu_backend(CpuBackendOptions{1}); };
  return run_engine(o, [](Engine& engine) { return drive(engine.executor()); });
}

}  // namespace
}  // namespace qmpi

int main(int argc, char** argv) {
  try {
    return qmpi::run(qmpi::parse(argc, argv));
  } catch (const qmpi::Error& e) {
    std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
    return e.exit_code();
  }
}
