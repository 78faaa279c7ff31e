#include "parallel/mpi_runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "core/errors.h"
#include "parallel/launcher.h"
#include "parallel/replica_survival.h"

namespace qmpi {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown thread level";
  }
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int started = 0;
  MPI_Initialized(&started);
  if (started)
    raise(Err::MpiInit, "MPI was already initialised in this process; qmpi starts it exactly once");
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    raise(Err::MpiInit, "MPI_Init_thread failed: " + std::string(text, len));
  }
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    raise(Err::MpiInit,
          std::string("MPI granted ") + thread_level_name(provided) +
              " but qmpi needs MPI_THREAD_FUNNELED (rank 0 runs a broker thread)",
          "Use an MPI built with thread support (Open MPI and MPICH from distributions have it).");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  processor_name_.assign(name, len);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiRuntime::end_job(int exit_code) const {
  report_exit_status(exit_code);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(exit_code);
}

void MpiRuntime::abort_job(const Error& e) const {
  std::fprintf(stderr, "qmpi: [rank %d %s] %s\n", rank_, processor_name_.c_str(),
               e.render().c_str());
  std::fflush(stderr);
  end_failed_rank(e.exit_code());
}

}  // namespace qmpi
