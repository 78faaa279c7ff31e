// `qmpi doctor`: checks the machine, the MPI world, the GPUs, a model folder and the job's
// communication before a real run, alone or under the job's own mpirun line. Exits 0 when
// nothing FAILs, else with the first failure's catalogue exit code (the same on every rank).
#include <cstdio>
#include <iostream>

#include <mpi.h>

#include "app/commands/commands.h"
#include "app/commands/options.h"
#include "doctor/comm_selftest.h"
#include "doctor/doctor.h"
#include "parallel/mpi_runtime.h"

namespace qmpi {

int cmd_doctor(const Args& args) {
  doctor::DoctorOptions o;
  std::string pp_layers, comm = "auto", sizes = "8,1MiB,64MiB";
  bool json = false;
  po::options_description desc("doctor");
  // clang-format off
  desc.add_options()
      ("model", po::value(&o.model), "model folder to check: config, index, shards, headers, "
       "shapes, tokenizer")
      ("model-config", po::value(&o.model_config),
       "a config.json instead of --model: only the layout and memory checks (e.g. before "
       "downloading, with --synthetic-weights runs in mind)")
      ("verify-sha256", po::value(&o.sha256_manifest),
       "check every file of a manifest written by `sha256sum FILES > MANIFEST` (names relative "
       "to --model)")
      ("tp", po::value(&o.tp)->default_value(0),
       "tensor-parallel size to check (default: the ranks of a host)")
      ("pp", po::value(&o.pp)->default_value(0), "pipeline stages to check (default: the rest)")
      ("dp", po::value(&o.dp)->default_value(1),
       "data-parallel replicas of the --tp x --pp mesh to check (as for batch and serve)")
      ("pp-layers", po::value(&pp_layers), "layers per stage, e.g. 27,27,26")
      ("backend", po::value(&o.backend)->default_value("auto"),
       "auto (cuda when built and a GPU is present), cpu or cuda")
      ("comm", po::value(&comm)->default_value("auto"),
       "TP communication on cuda: auto/nccl, or mpi (ranks may share GPUs)")
      ("max-model-len", po::value(&o.max_model_len)->default_value(0),
       "as for run/serve: sizes the KV cache in the memory check")
      ("max-num-seqs", po::value(&o.max_num_seqs)->default_value(1), "as for run/serve")
      ("block-size", po::value(&o.block_size)->default_value(16), "KV cache block (tokens)")
      ("gpu-memory-utilization", decimal_value(&o.gpu_util, 0.9),
       "share of each GPU the memory check plans with")
      ("comm-sizes", po::value(&sizes)->default_value("8,1MiB,64MiB"),
       "message sizes of the self-test, or none")
      ("comm-timeout", decimal_value(&o.comm_timeout_s, 60.0),
       "seconds a self-test operation may wait before the job is aborted naming the peer")
      ("json", po::bool_switch(&json), "print one JSON document instead of text");
  // clang-format on
  add_config_override_options(desc, o.overrides);
  po::variables_map vm;
  if (!parse_options(
          args, desc, vm,
          "qmpi doctor [--model DIR] [--verify-sha256 MANIFEST] [--dp D] [--tp T --pp P] "
          "[--json]      (alone, or under the job's mpirun line)"))
    return 0;
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
    raise(Err::Usage, "--backend must be auto, cpu or cuda, not '" + o.backend + "'");
  if (comm != "auto" && comm != "nccl" && comm != "mpi")
    raise(Err::Usage, "--comm must be auto, nccl or mpi, not '" + comm + "'");
  o.share_devices = comm == "mpi";
  if (o.tp < 0 || o.pp < 0) raise(Err::Usage, "--tp and --pp must be positive");
  if (o.dp < 1) raise(Err::Usage, "--dp must be at least 1");
  if (!o.model.empty() && !o.model_config.empty())
    raise(Err::Usage, "give --model DIR or --model-config FILE, not both");
  if (o.max_num_seqs < 1 || o.block_size < 1)
    raise(Err::Usage, "--max-num-seqs and --block-size must be at least 1");
  if (!pp_layers.empty())
    for (int32_t n : parse_id_list(pp_layers, "pp-layers")) o.pp_layers.push_back(n);
  if (sizes != "none") o.comm_sizes = doctor::parse_comm_sizes(sizes);

  MpiRuntime mpi;
  try {
    const doctor::DoctorReport report = doctor::run_doctor(o);
    if (mpi.rank() == 0) {
      if (json)
        std::cout << doctor::render_json(report).dump(2) << std::endl;
      else
        std::cout << doctor::render_text(report) << std::flush;
    }
    return report.exit_code;
  } catch (const Error& e) {
    if (mpi.size() == 1) throw;
    // A rank-local failure: say where, and end the job so no rank waits for this one.
    mpi.abort_job(e);
  }
  return 0;
}

}  // namespace qmpi
