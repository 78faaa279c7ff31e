// Which host every world rank runs on, and which device each rank uses there.
//
// Hosts come from the MPI runtime: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the ranks
// that share memory, and MPI_Get_processor_name names each group. So the hostfile or the Slurm
// allocation decides placement, never a guess.
//
// Test hook: QMPI_FAKE_HOSTS (read on world rank 0, used by every rank) makes discovery pretend
// the named hosts instead, e.g. "h1,h1,h1,h2,h2,h2" (one name per world rank) or "h1:3,h2:3"
// (name:count, in rank order). It exists so that multi-host mapping can be tested on one machine.
#pragma once
#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

namespace qmpi {

struct HostSlot {
  std::string host;
  int host_index = 0;  // hosts numbered by their lowest world rank
  int local_rank = 0;  // position among the ranks of the same host, in world rank order
  int local_size = 1;  // ranks on that host
};

// Expands a QMPI_FAKE_HOSTS value into one host name per world rank. Throws Error(Usage) when an
// entry is malformed or the names do not cover exactly `world_size` ranks.
std::vector<std::string> parse_fake_hosts(std::string_view spec, int world_size);

// One slot per world rank from the host name of each world rank.
std::vector<HostSlot> slots_from_host_names(const std::vector<std::string>& host_of_rank);

// Collective over `world`: every rank gets every rank's slot (from QMPI_FAKE_HOSTS when rank 0
// has it set). Two shared-memory groups that report the same processor name (containers with one
// hostname) are kept apart as "name#<host index>".
std::vector<HostSlot> discover_hosts(MPI_Comm world);

struct DeviceChoice {
  int index = -1;  // CUDA device ordinal to select, -1 on CPU
  std::string label =
      "cpu";  // "cpu", "cuda:1", or "cuda:1 (GPU 3)" when CUDA_VISIBLE_DEVICES maps it
};

// The device of a rank: local rank i uses the i-th visible device. `cuda_visible_devices` is the
// variable's value or nullptr when unset (then every device is visible and the CUDA backend checks
// the count). More local ranks than visible devices throws Error(VisibleDevices) unless
// `allow_sharing`, when ranks share devices round-robin. `host` names the host in errors.
DeviceChoice choose_device(bool cuda, int local_rank, int local_size,
                           const char* cuda_visible_devices, bool allow_sharing,
                           const std::string& host);

}  // namespace qmpi
