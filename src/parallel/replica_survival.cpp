#include "parallel/replica_survival.h"

#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "parallel/launcher.h"

namespace qmpi {
namespace {

std::atomic<bool> g_fail_alone{false};

}  // namespace

bool replica_survival_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("OMPI_MCA_orte_enable_recovery");
    const std::string s = v ? v : "";
    return s == "1" || s == "true" || s == "yes";
  }();
  return on;
}

void set_fail_alone(bool alone) {
  g_fail_alone = alone;
}

bool fail_alone() {
  return g_fail_alone;
}

void end_failed_rank(int exit_code) {
  report_exit_status(exit_code);
  if (!fail_alone()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace qmpi
