// SIGINT/SIGTERM handling under mpirun: a signal that reaches one rank stops every rank at the
// same step; a second signal ends the job at once with the interrupted error.
//   mpirun -np 6 mpitest_signal_stop --tp 2 --pp 3 --pid-dir DIR   (a test sends the signal)
//   mpirun -np 6 mpitest_signal_stop --tp 2 --pp 3 --raise 4 --twice (rank 4 signals itself)
// Each rank writes DIR/rank<r>.pid when started; ranks step (a small TP all-reduce and the
// collective stop check) every 10 ms for at most --steps steps. Rank 0 prints "signal_stop OK"
// when all ranks stopped at the same step.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "model/shard_plan.h"
#include "parallel/mesh.h"
#include "parallel/signals.h"

namespace qmpi {
namespace {

struct Args {
  Layout layout;
  std::string pid_dir;
  int raise_rank = -1;
  int raise_step = 5;
  bool twice = false;
  int steps = 3000;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) raise(Err::Usage, k + " needs a value");
      return std::string(argv[++i]);
    };
    if (k == "--tp")
      a.layout.tp = std::stoi(value());
    else if (k == "--pp")
      a.layout.pp = std::stoi(value());
    else if (k == "--pid-dir")
      a.pid_dir = value();
    else if (k == "--raise")
      a.raise_rank = std::stoi(value());
    else if (k == "--twice")
      a.twice = true;
    else if (k == "--steps")
      a.steps = std::stoi(value());
    else
      raise(Err::Usage, "unknown option " + k);
  }
  return a;
}

ModelConfig tiny() {
  ModelConfig c;
  c.hidden_size = 192;
  c.num_layers = 6;
  c.num_heads = 12;
  c.num_kv_heads = 6;
  c.head_dim = 16;
  c.intermediate_size = 384;
  c.vocab_size = 151936;
  return c;
}

int run(MpiRuntime& mpi, const Args& args) {
  ParallelConfig opts;
  opts.layout = args.layout;
  opts.comm_timeout_s = 60;
  Mesh mesh(mpi, model_fit(tiny()), opts);
  SignalGuard guard("rank " + std::to_string(mesh.rank()) + " (host " + mesh.host() + ")");
  if (!args.pid_dir.empty())
    std::ofstream(args.pid_dir + "/rank" + std::to_string(mesh.rank()) + ".pid") << getpid();
  mesh.world().barrier();

  std::vector<float> hidden(192, 1.0f);
  int step = 0;
  bool stopped = false;
  for (; step < args.steps; ++step) {
    mesh.tp_group().all_reduce_sum(hidden.data(), hidden.size());
    if (mesh.rank() == args.raise_rank && step == args.raise_step) {
      std::raise(SIGTERM);
      if (args.twice) std::raise(SIGTERM);
    }
    if (stop_requested_anywhere(mesh.world())) {
      stopped = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::vector<int32_t> steps(mesh.size());
  mesh.world().all_gather(&step, steps.data(), sizeof(int32_t));
  if (mesh.rank() == 0) {
    bool same = true;
    for (int32_t s : steps) same = same && s == step;
    if (stopped && same)
      std::printf("signal_stop OK: all %d ranks stopped at step %d (signal %d on rank 0: %s)\n",
                  mesh.size(), step, stop_signal(), stop_requested() ? "yes" : "no");
    else
      std::printf("signal_stop FAILED: stopped=%d, steps differ=%d\n", int(stopped), int(!same));
    std::fflush(stdout);
  }
  return stopped ? 0 : 1;
}

}  // namespace
}  // namespace qmpi

int main(int argc, char** argv) {
  try {
    qmpi::MpiRuntime mpi(&argc, &argv);
    try {
      return qmpi::run(mpi, qmpi::parse(argc, argv));
    } catch (const qmpi::Error& e) {
      if (mpi.rank() == 0) std::fprintf(stderr, "%s\n", e.render().c_str());
      return e.exit_code();
    }
  } catch (const qmpi::Error& e) {
    std::fprintf(stderr, "%s\n", e.render().c_str());
    return e.exit_code();
  }
}
