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

namespace {

// Replaces `path` whole with `text` (rename), so a reader never sees half of it.
bool write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool written = std::fputs(text.c_str(), f) >= 0;
    if (std::fclose(f) == 0 && written && std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  }
  std::remove(tmp.c_str());
  return false;
}

const char* status_file() {
  const char* path = std::getenv("QMPI_STATUS_FILE");
  return path && *path && launcher_rank() == 0 ? path : nullptr;
}

}  // namespace

void report_exit_status(int code) {
  const char* path = status_file();
  if (path && !write_whole(path, std::to_string(code) + "\n"))
    std::fprintf(stderr, "qmpi: could not write exit status %d to QMPI_STATUS_FILE=%s\n", code,
                 path);
}

void report_pid() {
  const char* path = status_file();
  char host[256] = {};
  if (!path || gethostname(host, sizeof host - 1) != 0) return;
  write_whole(std::string(path) + ".pid",
              std::string(host) + " " + std::to_string(getpid()) + "\n");
}

bool is_open_mpi_launcher(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == "mpirun" || name == "orterun" || name == "mpiexec" || name == "orted";
}

}  // namespace qmpi
