// One rank never joins (or dies); the others must abort the job with the comm-timeout message
// instead of hanging:
//   mpirun -np 6 mpitest_comm_timeout --tp 3 --pp 2 --timeout 3 --stuck 1 --op recv
// --op recv:          the stuck rank's next-stage peer (or previous, on the last stage) waits in a
//                     recv from it; everyone else waits in a world barrier with 4x the deadline.
// --op tp-allreduce:  the stuck rank's TP group waits in an all-reduce; the rest as above.
// --op world-barrier: every other rank waits in a world barrier.
// --op die:           the stuck rank exits with status 3 without MPI_Finalize while the others
//                     wait in a world barrier.
// The stuck rank sleeps --hang seconds (default 120) and exits 0, so a job that is not torn
// down ends with status 0 late: both show up in the driving script.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "model/shard_plan.h"
#include "parallel/comm_mpi.h"
#include "parallel/mesh.h"

namespace qmpi {
namespace {

struct Args {
  Layout layout;
  double timeout_s = 3;
  double hang_s = 120;
  int stuck = 1;
  std::string op = "recv";
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
    else if (k == "--timeout")
      a.timeout_s = std::stod(value());
    else if (k == "--hang")
      a.hang_s = std::stod(value());
    else if (k == "--stuck")
      a.stuck = std::stoi(value());
    else if (k == "--op")
      a.op = value();
    else
      raise(Err::Usage, "unknown option " + k);
  }
  if (a.op != "recv" && a.op != "tp-allreduce" && a.op != "world-barrier" && a.op != "die")
    raise(Err::Usage, "--op must be recv, tp-allreduce, world-barrier or die (got " + a.op + ")");
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
  opts.comm_timeout_s = args.timeout_s;
  Mesh mesh(mpi, model_fit(tiny()), opts);
  if (args.stuck < 0 || args.stuck >= mesh.size())
    raise(Err::Usage, "--stuck " + std::to_string(args.stuck) + " is not a rank");
  std::vector<std::string> hosts;
  for (const Placement& p : mesh.placements()) hosts.push_back(p.host);
  // Built by every rank (MPI_Comm_dup is collective) before the stuck rank stops answering.
  MpiComm patient(MPI_COMM_WORLD, "world (long deadline)", hosts, 4 * args.timeout_s);
  mesh.world().barrier();

  if (mesh.rank() == args.stuck) {
    std::fprintf(stderr, "rank %d: %s\n", mesh.rank(),
                 args.op == "die" ? "exiting with status 3" : "not joining");
    std::fflush(stderr);
    if (args.op == "die") std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::duration<double>(args.hang_s));
    return 0;
  }

  const int tp = mesh.tp();
  const int stuck_stage = args.stuck / tp;
  const int waiter = stuck_stage + 1 < mesh.pp() ? args.stuck + tp : args.stuck - tp;
  std::vector<float> data(1024, 1.0f);
  if (args.op == "recv" && mesh.rank() == waiter) {
    mesh.world().recv(data.data(), data.size() * sizeof(float), args.stuck);
  } else if (args.op == "tp-allreduce" && mesh.stage() == stuck_stage) {
    mesh.tp_group().all_reduce_sum(data.data(), 16);
  } else if (args.op == "world-barrier" || args.op == "die") {
    mesh.world().barrier();
  } else {
    patient.barrier();
  }
  std::fprintf(stderr, "rank %d: UNEXPECTED: the operation completed without rank %d\n",
               mesh.rank(), args.stuck);
  return 1;
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
