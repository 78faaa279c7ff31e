#include "parallel/signals.h"

#include <gtest/gtest.h>

#include <csignal>

namespace qmpi {
namespace {

TEST(Signals, FirstSignalOnlyRequestsAStop) {
  {
    SignalGuard guard("rank 0 (host test)");
    EXPECT_FALSE(stop_requested());
    EXPECT_EQ(stop_signal(), 0);
    std::raise(SIGTERM);
    EXPECT_TRUE(stop_requested());
    EXPECT_EQ(stop_signal(), SIGTERM);
  }
  // A new guard starts clean.
  SignalGuard again("rank 0 (host test)");
  EXPECT_FALSE(stop_requested());
}

TEST(Signals, GuardRestoresThePreviousHandler) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  { SignalGuard guard("rank 0 (host test)"); }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

TEST(SignalsDeathTest, SecondSignalEndsTheProcessWithTheInterruptedError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        SignalGuard guard("rank 3 (host h2)");
        std::raise(SIGINT);
        std::raise(SIGINT);
        std::_Exit(0);  // not reached: the second signal exits first
      },
      ::testing::ExitedWithCode(4),
      "error QM409 \\(interrupted\\): rank 3 \\(host h2\\) got a second SIGINT/SIGTERM");
}

}  // namespace
}  // namespace qmpi
