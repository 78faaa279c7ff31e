#include "parallel/watchdog.h"

#include <gtest/gtest.h>

namespace qmpi {
namespace {

TEST(CommTimeout, CollectiveNamesWaiterGroupAndPeersWithHosts) {
  TimeoutReport r;
  r.world_rank = 4;
  r.host = "h2";
  r.operation = "all_reduce_sum (16 floats)";
  r.group = "tp group 1 (world ranks 3-5)";
  r.peers = {{3, "h2"}, {5, "h2"}};
  r.waited_s = 2.04;
  Error e = comm_timeout_error(r);
  EXPECT_EQ(e.code(), Err::CommTimeout);
  EXPECT_EQ(e.message(),
            "rank 4 (host h2) waited 2.0 s in all_reduce_sum (16 floats) on tp group 1 (world "
            "ranks 3-5) without completing, waiting for its peers rank 3 (host h2), rank 5 "
            "(host h2)");
  EXPECT_NE(e.fix().find("same all_reduce_sum"), std::string::npos) << e.fix();
  EXPECT_EQ(e.exit_code(), 4);
}

TEST(CommTimeout, PointToPointNamesThePeer) {
  TimeoutReport r;
  r.world_rank = 3;
  r.host = "h2";
  r.operation = "recv (64 bytes)";
  r.group = "world";
  r.peers = {{0, "h1"}};
  r.point_to_point = true;
  r.waited_s = 1.5;
  Error e = comm_timeout_error(r);
  EXPECT_NE(e.message().find("rank 3 (host h2) waited 1.5 s in recv (64 bytes) on world"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("waiting for rank 0 (host h1)"), std::string::npos) << e.message();
  EXPECT_NE(e.fix().find("Check rank 0 on host h1"), std::string::npos) << e.fix();
}

TEST(CommTimeout, LongPeerListsAreCut) {
  TimeoutReport r;
  r.host = "a";
  r.operation = "barrier";
  r.group = "world";
  for (int i = 1; i < 20; ++i) r.peers.emplace_back(i, "a");
  Error e = comm_timeout_error(r);
  EXPECT_NE(e.message().find("rank 8 (host a) and 11 more"), std::string::npos) << e.message();
  EXPECT_EQ(e.message().find("rank 9 (host a)"), std::string::npos) << e.message();
}

}  // namespace
}  // namespace qmpi
