// MPI for the whole run: initialised once when the object is built, finalised when it goes.
// The thread level is MPI_THREAD_FUNNELED: only the main thread of a rank calls MPI, while rank
// 0's broker thread talks ZeroMQ and hands work over through a queue.
#pragma once
#include <string>

#include "core/errors.h"

namespace qmpi {

class MpiRuntime {
 public:
  // Throws Error(MpiInit) when MPI cannot start, grants less than MPI_THREAD_FUNNELED, or was
  // already started. Runs without a launcher too (a singleton world of one rank).
  MpiRuntime(int* argc = nullptr, char*** argv = nullptr);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // MPI_Get_processor_name: the host name the launcher gave this rank.
  const std::string& processor_name() const { return processor_name_; }
  // A failure on this rank alone: prints it with the rank and host, then ends the whole job
  // (MPI_Abort with the error's exit code) so that no other rank waits for this one.
  [[noreturn]] void abort_job(const Error& e) const;
  // Done, in a job that survives lost replicas (replica_survival.h): exits without
  // MPI_Finalize, whose fence waited forever once a rank was lost (Open MPI 4.1, recovery on;
  // MPI_Abort from rank 0 hung as well). Under recovery the launcher reports exit 0 anyway, so
  // the code also goes to the launch scripts (report_exit_status, parallel/launcher.h).
  [[noreturn]] void end_job(int exit_code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  std::string processor_name_;
};

}  // namespace qmpi
