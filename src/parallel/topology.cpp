#include "parallel/topology.h"

#include <charconv>
#include <cstdlib>
#include <map>
#include <set>

#include "core/errors.h"
#include "parallel/gather_strings.h"
#include "parallel/mpi_comm_handle.h"

namespace qmpi {
namespace {

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string_view part =
        s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    out.push_back(part);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> parse_fake_hosts(std::string_view spec, int world_size) {
  const std::string shown = "QMPI_FAKE_HOSTS=" + std::string(spec);
  std::vector<std::string> hosts;
  for (std::string_view entry : split_commas(spec)) {
    std::string_view name = entry;
    int count = 1;
    if (size_t colon = entry.find(':'); colon != std::string_view::npos) {
      name = entry.substr(0, colon);
      std::string_view digits = entry.substr(colon + 1);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (ec != std::errc() || end != digits.data() + digits.size() || count < 1)
        raise(Err::Usage,
              shown + " has the entry \"" + std::string(entry) +
                  "\" whose count is not a positive number",
              "Write host:count entries such as h1:3,h2:3, or one host name per rank.");
    }
    if (name.empty())
      raise(Err::Usage, shown + " has an empty host name",
            "Write host:count entries such as h1:3,h2:3, or one host name per rank.");
    hosts.insert(hosts.end(), count, std::string(name));
  }
  if (int(hosts.size()) != world_size)
    raise(Err::Usage,
          shown + " names " + std::to_string(hosts.size()) + " ranks but the job has " +
              std::to_string(world_size),
          "Give one host per world rank (host:count entries must add up to the rank count).");
  return hosts;
}

std::vector<HostSlot> slots_from_host_names(const std::vector<std::string>& host_of_rank) {
  std::map<std::string, int> index_of;
  std::vector<int> ranks_seen;  // per host index
  std::vector<HostSlot> slots(host_of_rank.size());
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    auto [it, fresh] = index_of.try_emplace(host_of_rank[r], int(ranks_seen.size()));
    if (fresh) ranks_seen.push_back(0);
    slots[r].host = host_of_rank[r];
    slots[r].host_index = it->second;
    slots[r].local_rank = ranks_seen[it->second]++;
  }
  for (auto& s : slots) s.local_size = ranks_seen[s.host_index];
  return slots;
}

std::vector<HostSlot> discover_hosts(MPI_Comm world) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  const char* env = rank == 0 ? std::getenv("QMPI_FAKE_HOSTS") : nullptr;
  std::string fake = broadcast_string(world, env ? env : "", 0);
  if (!fake.empty()) return slots_from_host_names(parse_fake_hosts(fake, size));

  MPI_Comm node_raw = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_raw);
  MpiCommHandle node(node_raw);
  int leader = rank;  // the lowest world rank of my shared-memory group identifies my host
  MPI_Bcast(&leader, 1, MPI_INT, 0, node.get());

  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<std::string> names = all_gather_strings(world, std::string(name, len));
  std::vector<int> leaders(size);
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world);

  // Label each group by its leader's name; a name two groups share gets the group's index.
  std::map<std::string, std::set<int>> leaders_of_name;
  for (int r = 0; r < size; ++r) leaders_of_name[names[leaders[r]]].insert(leaders[r]);
  std::map<int, int> group_index;
  for (int r = 0; r < size; ++r) group_index.try_emplace(leaders[r], int(group_index.size()));
  std::vector<std::string> labels(size);
  for (int r = 0; r < size; ++r) {
    const std::string& base = names[leaders[r]];
    labels[r] = leaders_of_name[base].size() > 1
                    ? base + "#" + std::to_string(group_index[leaders[r]])
                    : base;
  }
  return slots_from_host_names(labels);
}

DeviceChoice choose_device(bool cuda, int local_rank, int local_size,
                           const char* cuda_visible_devices, bool allow_sharing,
                           const std::string& host) {
  if (!cuda) return {};
  if (!cuda_visible_devices) return {local_rank, "cuda:" + std::to_string(local_rank)};

  const std::string shown = "CUDA_VISIBLE_DEVICES=" + std::string(cuda_visible_devices);
  std::vector<std::string> visible;
  for (std::string_view v : split_commas(cuda_visible_devices))
    if (!v.empty()) visible.emplace_back(v);
  if (visible.empty())
    raise(Err::NoGpu,
          shown + " on host " + host + " hides every GPU from its " + std::to_string(local_size) +
              " ranks",
          "Unset CUDA_VISIBLE_DEVICES or list the host's GPUs, or use --backend cpu.");
  std::set<std::string> seen;
  for (const auto& v : visible)
    if (!seen.insert(v).second)
      raise(Err::VisibleDevices, shown + " on host " + host + " lists device " + v + " twice");
  const int n = int(visible.size());
  if (local_size > n && !allow_sharing)
    raise(Err::VisibleDevices,
          "host " + host + " runs " + std::to_string(local_size) + " ranks but " + shown +
              " shows only " + std::to_string(n) + " GPU" + (n == 1 ? "" : "s"),
          "Launch at most " + std::to_string(n) + " ranks on this host (e.g. mpirun --map-by ppr:" +
              std::to_string(n) + ":node), or make more GPUs visible.");
  const int index = local_rank % n;
  return {index, "cuda:" + std::to_string(index) + " (GPU " + visible[index] + ")"};
}

}  // namespace qmpi
