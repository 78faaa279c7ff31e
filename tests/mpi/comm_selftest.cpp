// Every Comm operation on every group of a Mesh, checked element by element:
//   mpirun -np 6 mpitest_comm_selftest --tp 3 --pp 2 [--timeout S] [--allow-tp-across-hosts]
// Rank 0 prints the mapping table, then "comm_selftest OK ..." or the failures; the exit code is
// 0, 1 (a wrong value) or the catalogue exit code of a Mesh error (printed by rank 0).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/errors.h"
#include "model/shard_plan.h"
#include "parallel/mesh.h"

namespace qmpi {
namespace {

struct Args {
  Layout layout;
  double timeout_s = 60;
  bool allow_tp_across_hosts = false;
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
    else if (k == "--allow-tp-across-hosts")
      a.allow_tp_across_hosts = true;
    else
      raise(Err::Usage, "unknown option " + k);
  }
  return a;
}

// The tiny test shape: 6 layers, 12 heads, 6 KV heads, so TP 1/2/3/6 and PP 1..6 are valid.
ModelConfig tiny() {
  ModelConfig c;
  c.hidden_size = 192;
  c.num_layers = 6;
  c.num_heads = 12;
  c.num_kv_heads = 6;
  c.head_dim = 16;
  c.intermediate_size = 384;
  c.vocab_size = 151936;
  c.tie_word_embeddings = true;
  return c;
}

class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures_;
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank_, what.c_str());
  }
  int failures() const { return failures_; }

 private:
  int rank_;
  int failures_ = 0;
};

// Sum over the group of (member + 1) * (i + 1) equals n(n+1)/2 * (i + 1): exact in float here.
void check_all_reduce(Comm& c, size_t count, Checker& check) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = float((c.rank() + 1) * int64_t(i % 1000 + 1));
  c.all_reduce_sum(v.data(), count);
  const float members = float(c.size() * (c.size() + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += v[i] != members * float(i % 1000 + 1);
  check.expect(bad == 0, "all_reduce_sum of " + std::to_string(count) + " floats on " +
                             c.describe() + ": " + std::to_string(bad) + " wrong");
}

void check_all_gather(Comm& c, size_t bytes, Checker& check, bool in_place) {
  std::vector<unsigned char> all(bytes * c.size(), 0xEE);
  std::vector<unsigned char> mine(bytes);
  for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(c.rank() * 31 + i);
  const void* send = mine.data();
  if (in_place) {
    std::memcpy(all.data() + c.rank() * bytes, mine.data(), bytes);
    send = all.data() + c.rank() * bytes;
  }
  c.all_gather(send, all.data(), bytes);
  size_t bad = 0;
  for (int r = 0; r < c.size(); ++r)
    for (size_t i = 0; i < bytes; ++i)
      bad += all[r * bytes + i] != static_cast<unsigned char>(r * 31 + i);
  check.expect(bad == 0, std::string("all_gather") + (in_place ? " (in place)" : "") + " of " +
                             std::to_string(bytes) + " bytes on " + c.describe() + ": " +
                             std::to_string(bad) + " wrong");
}

void check_broadcast(Comm& c, size_t count, int root, Checker& check) {
  std::vector<int32_t> v(count, -1);
  if (c.rank() == root) std::iota(v.begin(), v.end(), 1000 * root);
  c.broadcast(v.data(), count * sizeof(int32_t), root);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += v[i] != int32_t(1000 * root + i);
  check.expect(bad == 0, "broadcast from " + std::to_string(root) + " on " + c.describe() + ": " +
                             std::to_string(bad) + " wrong");
}

// Stage s sends to stage s+1 (same TP rank) and the answer comes back, as activations and
// sampled tokens would.
void check_stage_neighbours(Mesh& mesh, size_t count, Checker& check) {
  Comm& world = mesh.world();
  std::vector<float> buf(count);
  if (mesh.prev_stage_rank() >= 0) {
    world.recv(buf.data(), count * sizeof(float), mesh.prev_stage_rank());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += buf[i] != float(mesh.prev_stage_rank() * 10 + i % 97);
    check.expect(bad == 0, "recv of " + std::to_string(count) + " floats from stage " +
                               std::to_string(mesh.stage() - 1) + ": " + std::to_string(bad) +
                               " wrong");
  }
  if (mesh.next_stage_rank() >= 0) {
    for (size_t i = 0; i < count; ++i) buf[i] = float(mesh.rank() * 10 + i % 97);
    world.send(buf.data(), count * sizeof(float), mesh.next_stage_rank());
  }
  // Backwards: each stage answers its predecessor with its own rank.
  int32_t answer = -1;
  if (mesh.next_stage_rank() >= 0) {
    world.recv(&answer, sizeof answer, mesh.next_stage_rank());
    check.expect(answer == mesh.next_stage_rank(), "answer from the next stage");
  }
  if (mesh.prev_stage_rank() >= 0) {
    answer = mesh.rank();
    world.send(&answer, sizeof answer, mesh.prev_stage_rank());
  }
}

int run(MpiRuntime& mpi, const Args& args) {
  ParallelConfig opts;
  opts.layout = args.layout;
  opts.comm_timeout_s = args.timeout_s;
  opts.allow_tp_across_hosts = args.allow_tp_across_hosts;
  Mesh mesh(mpi, model_fit(tiny()), opts);
  Checker check(mesh.rank());

  check.expect(mesh.tp_group().size() == mesh.tp(), "tp group size");
  check.expect(mesh.tp_group().rank() == mesh.tp_rank(), "tp group rank order");
  check.expect(mesh.world().size() == mesh.size(), "world size");
  for (Comm* c : {&mesh.world(), &mesh.tp_group()}) {
    for (size_t n : {size_t(1), size_t(4099), size_t(1) << 20}) check_all_reduce(*c, n, check);
    for (size_t n : {size_t(3), size_t(65536)}) {
      check_all_gather(*c, n, check, false);
      check_all_gather(*c, n, check, true);
    }
    for (int root = 0; root < c->size(); ++root) check_broadcast(*c, 777, root, check);
    c->barrier();
  }
  for (size_t n : {size_t(5), size_t(1) << 21}) check_stage_neighbours(mesh, n, check);

  // Informational: the cost of the small all-reduce a decode step does twice per layer.
  std::vector<float> hidden(192);
  mesh.tp_group().barrier();
  const auto start = std::chrono::steady_clock::now();
  const int rounds = 200;
  for (int i = 0; i < rounds; ++i) mesh.tp_group().all_reduce_sum(hidden.data(), hidden.size());
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      rounds;

  float failures = float(check.failures());
  mesh.world().all_reduce_sum(&failures, 1);
  if (mesh.rank() == 0) {
    if (failures == 0)
      std::printf(
          "comm_selftest OK: %d ranks, --tp %d --pp %d, tp all_reduce of 192 floats "
          "%.1f us\n",
          mesh.size(), mesh.tp(), mesh.pp(), us);
    else
      std::printf("comm_selftest FAILED: %.0f wrong results\n", failures);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
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
  } catch (const qmpi::Error& e) {  // MPI itself did not start
    std::fprintf(stderr, "%s\n", e.render().c_str());
    return e.exit_code();
  }
}
