// What a rank knows of the launcher that started it (mpirun and its orted daemons, or srun), and
// the one thing it tells the launch scripts that the launcher may lose: rank 0's exit status.
#pragma once
#include <sys/types.h>

namespace qmpi {

// This process's rank as the launcher (mpirun, srun) tells it, before MPI is up; 0 when not
// launched by one. Checks of rank 0's own files run before the weights load on it alone (a
// launcher ends the other ranks when it exits with an error).
int launcher_rank();

// Under recovery (mpirun --enable-recovery, which launch/ adds with DP > 1) mpirun exits 0 even
// when rank 0 failed or the job lost a replica, so launcher rank 0 also writes its exit status to
// the file QMPI_STATUS_FILE names (launch/mpirun and launch/slurm set it and exit with it). The
// file is replaced whole (rename), so a reader never sees half of it. Nothing without the
// variable, or on other ranks. Not async-signal-safe.
void report_exit_status(int code);

// Beside it, launcher rank 0 leaves "HOST PID" in QMPI_STATUS_FILE.pid at start-up, so that the
// launch scripts can pass a Ctrl-C or SIGTERM to rank 0 itself, which drains the job (finishes
// the requests in flight, writes the summary) where mpirun's own SIGTERM leaves no time to.
void report_pid();

// True when `pid` is an Open MPI launcher daemon (mpirun or orterun on the launching host, orted
// on the others). Ending a job, one sends SIGTERM to each of its ranks and SIGKILL a second
// later (odls_base_sigkill_timeout), whether a rank died or the launcher itself was interrupted.
bool is_open_mpi_launcher(pid_t pid);

}  // namespace qmpi
