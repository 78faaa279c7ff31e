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
};

// True once SIGINT or SIGTERM reached this process (while a SignalGuard was installed).
bool stop_requested();
// The first signal received, 0 if none.
int stop_signal();
// True when the first signal came from Open MPI's launcher, this process's parent: it is ending
// the job (a rank died, or mpirun itself was interrupted) and sends SIGKILL about a second after
// its SIGTERM (odls_base_sigkill_timeout), so there is no time to drain. A signal from anyone
// else (kill, scancel, Slurm's time limit through the launch scripts) asks for a drain.
bool stop_ends_job();
// Seconds since the first signal; 0 if none.
double seconds_since_stop();

// Collective over `world`: true on every rank when any rank saw a signal, so that all ranks stop
// at the same step (a signal may reach one rank only, e.g. `kill` of one pid).
bool stop_requested_anywhere(Comm& world);

}  // namespace qmpi
