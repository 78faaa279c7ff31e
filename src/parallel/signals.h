// SIGINT / SIGTERM (Ctrl-C, scancel, a time limit): the first one asks the run loop to stop after
// the current step, so results written so far stay whole; a second one ends the job at once with
// the Err::Interrupted message (exit without MPI_Finalize, which makes mpirun/srun tear the
// job down). Who sent the first one is kept: mpirun's own SIGTERM leaves a second to live.
#pragma once
#include <csignal>
#include <string>

#include "parallel/comm.h"

namespace qmpi {

class SignalGuard {
 public:
  // Installs the handlers for this process; `who` ("rank 3 (host h2)") goes into the message a
  // second signal prints. The previous handlers come back when the guard goes away.
  explicit SignalGuard(const std::string& who);
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_cont_ {};
};

// True once SIGINT or SIGTERM reached this process (while a SignalGuard was installed).
bool stop_requested();
// The first signal received, 0 if none.
int stop_signal();
// True when the first stop came from Open MPI's launcher, this process's parent: it is ending
// the job (a rank died, or mpirun itself was interrupted). It opens with SIGCONT, which counts as
// the first stop, then sends SIGTERM and SIGKILL, each odls_base_sigkill_timeout seconds
// (default 1) after the one before. A signal from anyone else (kill, scancel, Slurm's time
// limit through the launch scripts) asks for a drain.
bool stop_from_launcher();
// The seconds the launcher leaves between its signals: OMPI_MCA_odls_base_sigkill_timeout,
// which mpirun passes to every rank (launch/mpirun sets 30), else Open MPI's default 1.
double launcher_kill_grace_s();
// From this grace up, a stop from the launcher drains like any other (the launch scripts' case:
// a Ctrl-C of mpirun finishes the lines in flight); below it there is no time to.
inline constexpr double kDrainableGraceS = 5.0;
// True when the launcher is ending the job with too little grace to drain.
bool stop_ends_job();
// Seconds since the first signal; 0 if none.
double seconds_since_stop();

// Collective over `world`: true on every rank when any rank saw a signal, so that all ranks stop
// at the same step (a signal may reach one rank only, e.g. `kill` of one pid).
bool stop_requested_anywhere(Comm& world);

}  // namespace qmpi
