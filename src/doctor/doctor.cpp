#include "doctor/doctor.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/byte_size.h"
#include "doctor/cuda_checks.h"
#include "doctor/host_checks.h"
#include "doctor/model_checks.h"
#include "doctor/mpi_checks.h"
#include "doctor/sha256.h"
#include "parallel/gather_strings.h"
#include "parallel/mpi_comm_handle.h"
#include "parallel/topology.h"

namespace qmpi::doctor {
namespace {

struct Job {
  int rank = 0, world = 1;
  std::vector<HostSlot> slots;
  int hosts = 1;
  const HostSlot& me() const { return slots[size_t(rank)]; }
  bool host_leader() const { return me().local_rank == 0; }
  std::string host_tag() const { return "host " + me().host; }
};

void append(std::vector<Finding>& to, std::vector<Finding> from, const std::string& where) {
  for (Finding& f : from) {
    if (f.where.empty()) f.where = where;
    to.push_back(std::move(f));
  }
}

// The layout and backend every rank uses, as rank 0 decides them (ranks could read a config
// differently; the self-test must not).
struct Decision {
  Layout layout;
  bool by_default = false;
  bool cuda = false;
};

Decision decide(const DoctorOptions& o, const Job& job, const ModelConfig* cfg) {
  nlohmann::json j;
  if (job.rank == 0) {
    Decision d;
    if (o.tp || o.pp || o.dp > 1) {
      d.layout = Layout{std::max(o.tp, 1), std::max(o.pp, 1), o.pp_layers};
      d.layout.dp = o.dp;
    } else {
      d.layout = default_layout(job.slots, cfg);
      d.by_default = true;
    }
    d.cuda = o.backend == "cuda" || (o.backend == "auto" && cuda_built() && cuda_usable());
    j = {{"dp", d.layout.dp},
         {"tp", d.layout.tp},
         {"pp", d.layout.pp},
         {"default", d.by_default},
         {"cuda", d.cuda}};
  }
  j = nlohmann::json::parse(broadcast_string(MPI_COMM_WORLD, j.dump(), 0));
  Decision d;
  d.layout = Layout{j["tp"].get<int>(), j["pp"].get<int>(), o.pp_layers};
  d.layout.dp = j["dp"].get<int>();
  d.by_default = j["default"].get<bool>();
  d.cuda = j["cuda"].get<bool>();
  return d;
}

PlanInputs plan_inputs(const DoctorOptions& o, const Job& job, const Decision& d,
                       const std::map<std::string, DType>& dtypes,
                       const std::map<std::string, const GgmlTypeInfo*>& blocks) {
  PlanInputs in;
  in.gpus = d.layout.world_ranks();
  // Under the job's own mpirun the ranks sit on its hosts; alone, doctor plans for this host.
  in.nodes = job.world == in.gpus && in.gpus % job.hosts == 0 ? job.hosts : 1;
  in.backend = d.cuda ? BackendKind::Cuda : BackendKind::Cpu;
  in.gpu_util = o.gpu_util;
  in.max_model_len = o.max_model_len;
  in.max_num_seqs = o.max_num_seqs;
  in.block_size = o.block_size;
  in.tensor_dtypes = dtypes;
  in.tensor_blocks = blocks;
  in.model_arg = o.model.empty() ? "--synthetic-weights --model-config " + o.model_config
                                 : "--model " + o.model;
  return in;
}

// The TP groups' local ranks on this host (groups of two or more there).
std::vector<std::vector<int>> tp_groups_on_host(const Job& job, const Layout& l) {
  std::vector<std::vector<int>> out;
  if (job.world != l.world_ranks()) return out;
  for (int g = 0; g < l.dp * l.pp; ++g) {  // g = replica * pp + stage: consecutive ranks
    std::vector<int> locals;
    for (int t = 0; t < l.tp; ++t) {
      const HostSlot& slot = job.slots[size_t(g * l.tp + t)];
      if (slot.host_index == job.me().host_index) locals.push_back(slot.local_rank);
    }
    if (locals.size() > 1) out.push_back(locals);
  }
  return out;
}

// Collective over the ranks of each host: they share the manifest's files.
std::vector<Finding> verify_manifest(const DoctorOptions& o, const Job& job) {
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, job.me().host_index, job.me().local_rank, &split);
  MpiCommHandle host(split);
  std::vector<Finding> out;
  std::vector<ManifestEntry> entries;
  try {
    entries = read_sha256_manifest(o.sha256_manifest);
  } catch (const Error& e) {
    if (job.host_leader()) out.push_back(fail("model", e));
    return out;
  }
  std::vector<size_t> mine;
  for (size_t i = size_t(job.me().local_rank); i < entries.size(); i += size_t(job.me().local_size))
    mine.push_back(i);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  out = verify_sha256(o.model.empty() ? "." : o.model, entries, mine, &bytes);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t total = 0;
  int failures = int(out.size()), all_failures = 0;
  double slowest = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_UINT64_T, MPI_SUM, 0, host.get());
  MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, host.get());
  MPI_Reduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, host.get());
  if (job.host_leader() && all_failures == 0) {
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.1f s", slowest);
    out.push_back(ok("model", "sha256: all " + std::to_string(entries.size()) + " file(s) in " +
                                  o.sha256_manifest + " match (" + format_bytes(total) +
                                  " hashed by " + std::to_string(job.me().local_size) +
                                  " rank(s) in " + rate + ")"));
  }
  return out;
}

// What the phases of run_doctor share: the job, what is known of the model, the decision, and
// this rank's findings so far.
struct Context {
  const DoctorOptions& o;
  Job job;
  std::string here;  // "host NAME": where this host's findings happened
  std::optional<ModelConfig> cfg;
  std::map<std::string, DType> dtypes;
  std::map<std::string, const GgmlTypeInfo*> blocks;  // GGUF block-quantized tensors
  Decision d;
  std::vector<Finding> mine;
  const ModelConfig* config() const { return cfg ? &*cfg : nullptr; }
};

Job discover_job() {
  Job job;
  MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job.world);
  job.slots = discover_hosts(MPI_COMM_WORLD);
  std::set<int> host_ids;
  for (const HostSlot& s : job.slots) host_ids.insert(s.host_index);
  job.hosts = int(host_ids.size());
  return job;
}

// The model: one rank per host checks the folder as that host sees it; every rank needs the
// config for the layout.
void model_phase(Context& c) {
  const DoctorOptions& o = c.o;
  if (!o.model.empty()) {
    if (c.job.host_leader()) {
      ModelCheck m = check_model(o.model, o.overrides);
      c.cfg = m.config;
      c.dtypes = std::move(m.tensor_dtypes);
      c.blocks = std::move(m.tensor_blocks);
      append(c.mine, std::move(m.findings), c.here);
    } else {
      try {
        c.cfg = ModelConfig::load(o.model, o.overrides);
      } catch (const Error&) {
      }
    }
  } else if (!o.model_config.empty()) {
    try {
      c.cfg = ModelConfig::load(o.model_config, o.overrides);
      if (c.job.rank == 0)
        c.mine.push_back(ok("model", "--model-config " + o.model_config + ": " +
                                         c.cfg->architecture +
                                         " (layout and memory checks only; give --model DIR to "
                                         "check the files)"));
    } catch (const Error& e) {
      if (c.job.rank == 0) c.mine.push_back(fail("model", e));
    }
  }
}

// One rank per host: its GPUs, its limits, and (on CPU) the layout's memory against MemAvailable.
void host_phase(Context& c, const PlanInputs& plan) {
  if (!c.job.host_leader()) return;
  const ModelConfig* config = c.config();
  GpuHostInput gpu;
  gpu.host = c.job.me().host;
  gpu.local_size = c.job.me().local_size;
  gpu.tp_groups = tp_groups_on_host(c.job, c.d.layout);
  gpu.required = c.o.backend == "cuda";
  gpu.share_devices = c.o.share_devices;
  gpu.cfg = c.d.cuda ? config : nullptr;
  gpu.layout = c.d.layout;
  gpu.plan = plan;
  append(c.mine, check_cuda_host(gpu), c.here);

  const HostLimits limits = read_host_limits();
  append(c.mine, host_limit_findings(limits), c.here);
  if (c.d.cuda) return;
  if (config) {
    PlanInputs in = plan;
    in.host_mem = limits.mem_available;
    const int sharing = in.gpus / in.nodes;
    append(c.mine,
           memory_findings("host", *config, c.d.layout, in,
                           "MemAvailable " + format_bytes(limits.mem_available) + " shared by " +
                               std::to_string(sharing) + " rank(s) on this host"),
           c.here);
  } else {
    c.mine.push_back(ok("host", "MemAvailable: " + format_bytes(limits.mem_available) +
                                    " (give --model or --model-config to check a layout's "
                                    "memory against it)"));
    c.mine.back().where = c.here;
  }
}

// Whether every rank has a usable GPU: the self-test runs on the GPUs only then (a collective
// decision: a rank without a device would otherwise stop the whole job before the report).
bool device_phase(Context& c) {
  int on_device = 0;
  if (c.d.cuda) {
    const HostSlot& me = c.job.me();
    auto choice = check_cuda_rank(me.local_rank, me.local_size, c.o.share_devices, me.host);
    on_device = choice.empty() && cuda_usable() ? 1 : 0;
    append(c.mine, std::move(choice), "rank " + std::to_string(c.job.rank));
  }
  MPI_Allreduce(MPI_IN_PLACE, &on_device, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return on_device != 0;
}

// The self-test over the layout's groups, or the whole world as one group when the layout
// does not match the world (that mismatch is already a FAIL above).
std::vector<CommMeasurement> comm_phase(Context& c, bool on_device) {
  const Job& job = c.job;
  const Layout& layout = c.d.layout;
  if (job.world == 1 || c.o.comm_sizes.empty()) {
    if (job.rank == 0)
      c.mine.push_back(ok("comm", job.world == 1
                                      ? "single rank: no communication to test (run under mpirun "
                                        "with the job's rank count for the self-test)"
                                      : "self-test skipped (--comm-sizes none)"));
    return {};
  }
  SelfTestSetup s;
  // Replicas' TP groups are consecutive ranks too: they are tested as more stages (the
  // sends between the last stage of one replica and the next one are extra, and harmless).
  const bool matches = job.world == layout.world_ranks();
  s.tp = matches ? layout.tp : job.world;
  s.pp = matches ? layout.dp * layout.pp : 1;
  s.sizes = c.o.comm_sizes;
  s.timeout_s = c.o.comm_timeout_s;
  for (const HostSlot& slot : job.slots) s.host_of_rank.push_back(slot.host);
  if (on_device)
    use_cuda_for_selftest(s, job.me().local_rank, job.me().local_size, c.o.share_devices);
  else if (c.d.cuda && job.rank == 0)
    c.mine.push_back(ok("comm",
                        "the self-test uses host memory and MPI: not every rank has a "
                        "usable GPU (see the cuda section)"));
  if (!matches && job.rank == 0)
    c.mine.push_back(ok("comm", "the self-test treats all " + std::to_string(job.world) +
                                    " ranks as one TP group, since the layout does not match "
                                    "the world"));
  return run_comm_selftest(s);
}

// Everything to every rank, merged into one report.
DoctorReport gather_report(const Context& c, const std::vector<CommMeasurement>& measured) {
  nlohmann::json pack = {{"findings", nlohmann::json::array()}, {"comm", nlohmann::json::array()}};
  for (const Finding& f : c.mine) pack["findings"].push_back(to_json(f));
  for (const CommMeasurement& m : measured) pack["comm"].push_back(to_json(m));
  std::vector<Finding> all;
  DoctorReport r;
  for (const std::string& s : all_gather_strings(MPI_COMM_WORLD, pack.dump())) {
    const nlohmann::json j = nlohmann::json::parse(s);
    for (const auto& f : j["findings"]) all.push_back(finding_from_json(f));
    for (const auto& m : j["comm"]) r.comm.push_back(measurement_from_json(m));
  }
  std::stable_sort(r.comm.begin(), r.comm.end(), [](const auto& a, const auto& b) {
    return a.op == "all-reduce" && b.op != "all-reduce";
  });
  std::vector<Finding> comm = comm_findings(r.comm);
  all.insert(all.end(), comm.begin(), comm.end());
  r.ranks = c.job.world;
  r.hosts = c.job.hosts;
  r.layout = c.d.layout;
  r.backend = c.d.cuda ? "cuda" : "cpu";
  r.findings = merge_findings(all);
  r.exit_code = exit_code_of(r.findings);
  return r;
}

}  // namespace

DoctorReport run_doctor(const DoctorOptions& o) {
  Context c{o, discover_job(), {}, {}, {}, {}, {}, {}};
  c.here = c.job.host_tag();
  model_phase(c);
  c.d = decide(o, c.job, c.config());
  if (c.job.rank == 0) {
    append(c.mine, mpi_findings(mpi_library_version(), c.job.slots), "");
    append(c.mine, layout_findings(c.d.layout, c.d.by_default, c.job.slots, c.config()), "");
  }
  host_phase(c, plan_inputs(o, c.job, c.d, c.dtypes, c.blocks));
  const bool on_device = device_phase(c);
  if (!o.sha256_manifest.empty()) append(c.mine, verify_manifest(o, c.job), c.here);
  return gather_report(c, comm_phase(c, on_device));
}

}  // namespace qmpi::doctor
