// Rank 0's exit status for the launch scripts (QMPI_STATUS_FILE), and how a rank recognises
// Open MPI's launcher among the processes that may signal it.
#include "parallel/launcher.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../temp_dir.h"

namespace qmpi {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Launcher, Rank0WritesItsExitStatusWhereTheScriptsLook) {
  testing::TempDir dir;
  const std::string path = dir.file("status");
  setenv("QMPI_STATUS_FILE", path.c_str(), 1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  report_exit_status(4);
  EXPECT_FALSE(std::filesystem::exists(path)) << "only rank 0 speaks for the job";
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  report_exit_status(4);
  report_exit_status(5);  // the last word wins, whole
  EXPECT_EQ(read_all(path), "5\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.str()), {}), 1)
      << "no temporary file is left beside it";
  unsetenv("QMPI_STATUS_FILE");
  unsetenv("OMPI_COMM_WORLD_RANK");
  std::filesystem::remove(path);
  report_exit_status(0);
  EXPECT_FALSE(std::filesystem::exists(path)) << "without the variable nothing is written";
}

TEST(Launcher, OpenMpiLaunchersAreKnownByTheirName) {
  EXPECT_FALSE(is_open_mpi_launcher(getpid()));  // a test binary
  EXPECT_FALSE(is_open_mpi_launcher(0));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "orted");
    const char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_TRUE(is_open_mpi_launcher(child));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace qmpi
