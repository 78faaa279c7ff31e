// The MPI section of `qmpi doctor`: which MPI the job runs on, how its ranks sit on hosts, and
// whether the layout under test can run there (world size, the model's divisibility rules, TP
// groups inside hosts).
#pragma once
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "parallel/topology.h"

namespace qmpi::doctor {

// "Open MPI v4.1.4, package: Debian OpenMPI, ... (MPI 3.1)": MPI_Get_library_version's first
// line and the standard version.
std::string mpi_library_version();

// Without --tp/--pp: TP as wide as every host allows (the gcd of the ranks per host, so TP groups
// stay inside hosts when ranks fill hosts in order) and the rest as stages. With a model, the
// widest such layout the model can run, when there is one.
Layout default_layout(const std::vector<HostSlot>& slots, const ModelConfig* cfg);

// "vm: 6 ranks (0-5); h2: 2 ranks (6-7)"
std::string ranks_per_host(const std::vector<HostSlot>& slots);

std::vector<Finding> mpi_findings(const std::string& library, const std::vector<HostSlot>& slots);

// World size vs tp x pp (a single process only plans on paper), the model's layout rules, and
// TP groups inside hosts.
std::vector<Finding> layout_findings(const Layout& layout, bool chosen_by_default,
                                     const std::vector<HostSlot>& slots, const ModelConfig* cfg);

}  // namespace qmpi::doctor
