// No silent hangs: every MPI operation of a Comm is started nonblocking and waited for here
// against a deadline (--comm-timeout). A rank whose peer is stuck, dead or unreachable prints one
// line naming itself, the operation, the group or peer and their hosts, then aborts the job.
#pragma once
#include <mpi.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace qmpi {

// Waits for `request` with MPI_Test: busy tests, then yields for up to 1 ms, then sleeps of
// 50-200 us, so that a reply microseconds away is seen at once and more ranks than cores (6 ranks
// on 2 cores in CI) still leave each other CPU time. Returns false when `timeout_s` (> 0; <= 0
// waits forever) passes first; `waited_s` receives the time spent either way.
bool wait_with_deadline(MPI_Request& request, double timeout_s, double& waited_s,
                        MPI_Status* status = MPI_STATUS_IGNORE);

// The loop of wait_with_deadline over any test (true once done). Time this process was not
// running at all (SIGSTOP, a frozen VM: a pause of microseconds that took over a second) does
// not count as waiting: a rank that was stopped itself must not, once continued, time out and
// blame a peer that was only waiting for it.
bool wait_until_done(const std::function<bool()>& done, double timeout_s, double& waited_s);

struct TimeoutReport {
  int world_rank = 0;
  std::string host;
  std::string operation;  // e.g. "all_reduce_sum (4096 floats)"
  std::string group;      // Comm::describe() of the group
  // The peers waited for, as (world rank, host): the one peer of a send/recv, or the other
  // members of a collective's group.
  std::vector<std::pair<int, std::string>> peers;
  bool point_to_point = false;
  double waited_s = 0;
};

// The Error(CommTimeout) for a report: one sentence with ranks, hosts, group and seconds.
Error comm_timeout_error(const TimeoutReport& report);

// True in a process with an abort hook (rank 0 of a server: clients to tell) once Open MPI's
// launcher has been ending the job for a quarter of a second (signals.h, stop_ends_job): waits
// give up then instead of at their deadline, so that the hook answers the clients before the
// launcher's SIGKILL, a second after its SIGTERM. A healthy mesh completes a step in that time;
// a peer that has not answered is most likely the rank whose death made the launcher end the job.
bool job_end_cuts_waits();
// The Error(RankDied) for a wait that job_end_cuts_waits() cut short: who was waited for, where.
Error job_end_error(const TimeoutReport& report);

// Prints `error` as one line on stderr and ends the whole job with MPI_Abort and the error's exit
// code, so that no rank is left waiting.
[[noreturn]] void abort_job(const Error& error);

// A last word before abort_job ends the process (a server tells its clients why); runs on the
// aborting thread, must return within a second or so. Empty: none. One per process.
void set_abort_hook(std::function<void(const Error&)> hook);

}  // namespace qmpi
