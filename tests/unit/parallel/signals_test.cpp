#include "parallel/signals.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
    EXPECT_FALSE(stop_ends_job()) << "a signal from this process asks for a drain";
    EXPECT_GE(seconds_since_stop(), 0.0);
  }
  // A new guard starts clean.
  SignalGuard again("rank 0 (host test)");
  EXPECT_FALSE(stop_requested());
}

// Open MPI ends a job (a rank died, or mpirun was interrupted) with SIGTERM from each rank's
// parent, an mpirun or orted process, and SIGKILL a second later: no time to drain.
TEST(Signals, ASigtermFromAnOpenMpiLauncherParentEndsTheJob) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SignalGuard guard("rank 1 (host test)");
    const char c = 1;
    (void)!write(ready[1], &c, 1);
    while (!stop_requested()) usleep(1000);
    _exit(stop_ends_job() ? 10 : 11);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  char name[17] = {};
  prctl(PR_GET_NAME, name);
  prctl(PR_SET_NAME, "mpirun");  // this test process, the child's parent, plays mpirun
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  prctl(PR_SET_NAME, name);
  close(ready[0]);
  close(ready[1]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 10) << "the child did not see its parent mpirun as the sender";
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
