// Whether a data-parallel replica may be lost while the job goes on, and what this process does
// about it. Open MPI 4.1 (no ULFM) keeps the other ranks running after one dies only when its
// launcher was told so (mpirun --enable-recovery, or OMPI_MCA_orte_enable_recovery=1, which
// reaches every rank's environment either way); then rank 0 must never wait on a lost rank
// without a deadline, a lost replica's surviving ranks must leave on their own instead of
// aborting the job, and no rank may call MPI_Finalize (MpiRuntime::end_job).
#pragma once

namespace qmpi {

// True when the launcher keeps the job alive after a rank dies (read once from the environment).
bool replica_survival_enabled();

// This rank's comm failures end this process alone (a rank of replica 1 or later, survival on);
// the default ends the whole job.
void set_fail_alone(bool alone);
bool fail_alone();

// Ends this process after a fatal error it has already printed: leaves rank 0's exit status for
// the launch scripts (report_exit_status), then MPI_Abort of the whole job unless this rank
// fails alone, then _Exit (MPI_Abort does not return; this keeps [[noreturn]] honest).
[[noreturn]] void end_failed_rank(int exit_code);

}  // namespace qmpi
