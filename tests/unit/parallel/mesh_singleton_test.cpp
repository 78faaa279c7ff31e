// One rank without mpirun (an MPI singleton): the Mesh, its communicators and the watchdog's
// deadline. MPI starts once per process, so this file holds a single test.
#include <gtest/gtest.h>

#include <cstring>

#include "core/errors.h"
#include "model/shard_plan.h"
#include "parallel/comm_mpi.h"
#include "parallel/mesh.h"
#include "parallel/watchdog.h"

namespace qmpi {
namespace {

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

TEST(MeshSingleton, OneRankOwnsEverythingAndCommsWork) {
  MpiRuntime mpi;
  ASSERT_EQ(mpi.size(), 1);
  ASSERT_EQ(mpi.rank(), 0);
  EXPECT_FALSE(mpi.processor_name().empty());

  ParallelConfig bad;
  bad.layout = {2, 1, {}};
  try {
    Mesh m(mpi, model_fit(tiny()), bad);
    FAIL() << "a 1-rank world formed --tp 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::WorldSize);
    EXPECT_EQ(e.message(), "1 rank cannot form --tp 2 --pp 1 (2 ranks)");
  }

  ParallelConfig opts;
  opts.comm_timeout_s = 5;
  Mesh mesh(mpi, model_fit(tiny()), opts);
  EXPECT_EQ(mesh.size(), 1);
  EXPECT_EQ(mesh.tp_rank(), 0);
  EXPECT_EQ(mesh.stage(), 0);
  EXPECT_EQ(mesh.prev_stage_rank(), -1);
  EXPECT_EQ(mesh.next_stage_rank(), -1);
  EXPECT_EQ(mesh.host(), mpi.processor_name());
  EXPECT_EQ(mesh.device(), "cpu");
  EXPECT_EQ(mesh.placements()[0].layers.size(), 6);
  EXPECT_EQ(mesh.log_tag(), "rank 0 " + mpi.processor_name() + ":cpu");
  EXPECT_NE(mesh.mapping_table().find("0-5 (6)"), std::string::npos) << mesh.mapping_table();
  EXPECT_EQ(mesh.tp_group().describe(), "tp group 0 (world ranks 0-0)");
  EXPECT_EQ(mesh.world().describe(), "world");

  // A backend plugs its own TP communicator in (NCCL on CUDA); the factory gets the group.
  std::string factory_label;
  mesh.replace_tp_comm([&](MPI_Comm group, const std::string& label) -> std::unique_ptr<Comm> {
    factory_label = label;
    return std::make_unique<MpiComm>(group, "plugged " + label, std::vector<std::string>{"h"}, 5);
  });
  EXPECT_EQ(factory_label, "tp group 0 (world ranks 0-0)");
  EXPECT_EQ(mesh.tp_group().describe(), "plugged tp group 0 (world ranks 0-0)");

  float v[3] = {1.5f, -2.0f, 4.0f};
  mesh.tp_group().all_reduce_sum(v, 3);
  EXPECT_EQ(v[1], -2.0f);
  char in[4] = {'a', 'b', 'c', 'd'}, out[4] = {};
  mesh.world().all_gather(in, out, 4);
  EXPECT_EQ(std::memcmp(in, out, 4), 0);
  mesh.world().all_gather(out, out, 4);  // in place
  EXPECT_EQ(std::memcmp(in, out, 4), 0);
  mesh.world().broadcast(in, 4, 0);
  mesh.world().barrier();

  // The deadline: a receive nobody matches returns false after the timeout.
  MpiComm self(MPI_COMM_SELF, "self", {mesh.host()}, 0.05);
  MPI_Request req;
  int value = 0;
  MPI_Irecv(&value, 1, MPI_INT, 0, 99, self.handle(), &req);
  double waited = 0;
  EXPECT_FALSE(wait_with_deadline(req, 0.05, waited));
  EXPECT_GE(waited, 0.05);
  MPI_Cancel(&req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);

  int sent = 7;
  MPI_Request send_req;
  MPI_Isend(&sent, 1, MPI_INT, 0, 98, self.handle(), &send_req);
  MPI_Irecv(&value, 1, MPI_INT, 0, 98, self.handle(), &req);
  EXPECT_TRUE(wait_with_deadline(req, 5, waited));
  EXPECT_TRUE(wait_with_deadline(send_req, 5, waited));
  EXPECT_EQ(value, 7);
}

}  // namespace
}  // namespace qmpi
