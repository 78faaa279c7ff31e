#include "parallel/watchdog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

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

// Issue 19, item 7: a rank that was itself stopped (SIGSTOP) must not, once continued, time out
// and blame the peer that was only waiting for it: the time it did not run is not waiting.
TEST(WaitWithDeadline, TimeThisProcessWasStoppedDoesNotCount) {
  const auto start = std::chrono::steady_clock::now();
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(std::system(("(sleep 0.3; kill -STOP " + pid + "; sleep 2.5; kill -CONT " + pid +
                         ") >/dev/null 2>&1 &")
                            .c_str()),
            0);
  double waited = 0;
  EXPECT_FALSE(wait_until_done([] { return false; }, 1.5, waited));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(wall, 3.5) << "the 2.5 s stop was counted as waiting";
  EXPECT_LT(waited, 2.0);
  EXPECT_GE(waited, 1.5);
}

TEST(WaitWithDeadline, DoneAtOnceOrAfterAWhile) {
  double waited = -1;
  EXPECT_TRUE(wait_until_done([] { return true; }, 1.0, waited));
  EXPECT_GE(waited, 0.0);
  int calls = 0;
  EXPECT_TRUE(wait_until_done([&] { return ++calls > 5000; }, 10.0, waited));
  EXPECT_FALSE(wait_until_done([] { return false; }, 0.05, waited));
  EXPECT_GE(waited, 0.05);
}

}  // namespace
}  // namespace qmpi
