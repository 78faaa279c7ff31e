// `qmpi doctor`: every check of the job's machine, MPI world, GPUs, model files and
// communication, run alone or under the same mpirun line as the real job, reporting all
// findings instead of stopping at the first.
//
// Who checks what: world rank 0 the MPI world and the layout; one rank per host (its local rank
// 0) the host, its GPUs and the model folder as that host sees it; all ranks of a host share the
// sha256 verification; every rank its own device choice; all ranks the communication self-test.
// Findings are gathered on every rank, so every rank returns the same report and exit code.
#pragma once
#include <string>
#include <vector>

#include "doctor/report.h"
#include "model/config_overrides.h"

namespace qmpi::doctor {

struct DoctorOptions {
  std::string model;            // --model DIR: every model check
  std::string model_config;     // --model-config FILE: the layout and memory checks only
  std::string sha256_manifest;  // --verify-sha256 MANIFEST
  ConfigOverrides overrides;    // --hf-overrides, --rope-scaling
  int tp = 0, pp = 0;           // 0 and 0: default_layout()
  int dp = 1;                   // data-parallel replicas of the tp x pp mesh
  std::vector<int> pp_layers;
  std::string backend = "auto";  // auto (cuda when built and a GPU is present), cpu, cuda
  bool share_devices = false;    // --comm mpi
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 1;
  int block_size = 16;
  double gpu_util = 0.9;
  std::vector<uint64_t> comm_sizes;  // empty: no self-test
  double comm_timeout_s = 60;
};

// Collective over MPI_COMM_WORLD (MPI must be running).
DoctorReport run_doctor(const DoctorOptions& options);

}  // namespace qmpi::doctor
