// The Engine's device KV sizing under mpirun, on the CPU backend with a made-up device sizer:
// every rank runs the profiling step, rank r claims room for 1000 - 100 r blocks (or fails with
// --fail-rank r), and every rank must allocate the smallest room, then log its memory line.
//   mpirun -np 4 mpitest_kv_sizing --model-config DIR/config.json --tp 2 --pp 2 [--fail-rank 2]
// Rank 0 prints "kv_sizing OK: <blocks> blocks" once the job ran; with --fail-rank every rank
// raises that rank's QM151 and the job exits with 2 (no rank left waiting).
#include <cstdio>
#include <string>

#include "core/errors.h"
#include "synthetic_engine.h"

namespace qmpi {
namespace {

int run(const mpitest::EngineArgs& args) {
  EngineConfig o = mpitest::synthetic_cpu_engine(args);
  o.cache.max_model_len = 64;
  o.scheduler.max_batched_tokens = 48;
  o.memory_report = launch_memory_report;
  o.backend.size_kv_on_device = [fail = args.extra.at("--fail-rank")](
                                    Backend&, const DeviceKvRequest& r,
                                    const std::function<void()>& profile_step) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    profile_step();  // the real step, on the CPU backend
    if (rank == fail) raise(Err::KvCacheDoesNotFit, "made-up: no room for one block");
    MeasuredMemory m;
    m.device = true;
    m.total_bytes = 80ull << 30;
    m.free_bytes = 70ull << 30;
    m.rank_budget_bytes = 10ull << 30;
    m.overhead_bytes = 1ull << 30;
    m.bytes_per_block = r.bytes_per_block;
    m.rank_kv_blocks = 1000 - 100 * rank;
    return m;
  };
  return run_engine(o, [](Engine& engine) {
    std::printf("kv_sizing OK: %lld blocks\n", (long long)engine.blocks().num_blocks());
    return 0;
  });
}

}  // namespace
}  // namespace qmpi

int main(int argc, char** argv) {
  return qmpi::mpitest::run_main([&] {
    return qmpi::run(qmpi::mpitest::parse_engine_args(argc, argv, {{"--fail-rank", -1}}));
  });
}
