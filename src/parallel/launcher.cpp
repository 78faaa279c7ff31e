#include "parallel/launcher.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace qmpi {

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

void report_exit_status(int code) {
  const char* path = std::getenv("QMPI_STATUS_FILE");
  if (!path || !*path || launcher_rank() != 0) return;
  const std::string tmp = std::string(path) + ".tmp" + std::to_string(getpid());
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool written = std::fprintf(f, "%d\n", code) > 0;
    if (std::fclose(f) == 0 && written && std::rename(tmp.c_str(), path) == 0) return;
  }
  std::fprintf(stderr, "qmpi: could not write exit status %d to QMPI_STATUS_FILE=%s\n", code, path);
  std::remove(tmp.c_str());
}

bool is_open_mpi_launcher(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == "mpirun" || name == "orterun" || name == "mpiexec" || name == "orted";
}

}  // namespace qmpi
