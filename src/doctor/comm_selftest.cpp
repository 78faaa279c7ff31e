#include "doctor/comm_selftest.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>

#include "core/byte_size.h"
#include "core/errors.h"
#include "parallel/comm_mpi.h"
#include "parallel/mpi_comm_handle.h"

namespace qmpi::doctor {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class HostMemory : public TestMemory {
 public:
  std::string name() const override { return "host"; }
  void* alloc(size_t bytes) override {
    blocks_.emplace_back(bytes);
    return blocks_.back().data();
  }
  void upload(void* dst, const void* host, size_t bytes) override { std::memcpy(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override {
    std::memcpy(host, src, bytes);
  }

 private:
  std::vector<std::vector<uint8_t>> blocks_;
};

// Element i of rank r's all-reduce input: small integers, so every sum is exact in float.
float allreduce_input(int rank, size_t i) {
  return float((rank + 1) * int(i % 13 + 1));
}

uint8_t p2p_byte(int world_rank, size_t i) {
  return uint8_t(i * 131 + size_t(world_rank) * 7 + 1);
}

std::string ranks_label(int first, int last) {
  return first == last ? "world rank " + std::to_string(first)
                       : "world ranks " + std::to_string(first) + "-" + std::to_string(last);
}

std::string size_text(uint64_t bytes) {
  return format_bytes(bytes);
}

// The first element that differs, as "element 17 is 12 instead of 21", or "".
std::string allreduce_error(const std::vector<float>& got, int n) {
  const float total = float(n * (n + 1) / 2);
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = total * float(i % 13 + 1);
    if (got[i] != want) {
      std::ostringstream s;
      s << "element " << i << " is " << got[i] << " instead of " << want;
      return s.str();
    }
  }
  return "";
}

std::string p2p_error(const std::vector<uint8_t>& got, int sender) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != p2p_byte(sender, i))
      return "byte " + std::to_string(i) + " is " + std::to_string(got[i]) + " instead of " +
             std::to_string(p2p_byte(sender, i));
  return "";
}

double max_over(MPI_Comm comm, double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}

int min_over(MPI_Comm comm, int v) {
  int out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, comm);
  return out;
}

// Every TP group at once, one size: a checked warm-up, then timed iterations.
void all_reduce_round(Comm& comm, MPI_Comm reduce_on, TestMemory& mem, const std::string& label,
                      int world_rank, uint64_t bytes, std::vector<CommMeasurement>& out) {
  const size_t count = size_t(bytes / sizeof(float));
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = allreduce_input(comm.rank(), i);
  auto* buf = static_cast<float*>(mem.alloc(bytes));
  mem.upload(buf, host.data(), bytes);
  comm.all_reduce_sum(buf, count);
  mem.synchronize();
  mem.download(host.data(), buf, bytes);
  const std::string error = allreduce_error(host, comm.size());
  const int group_ok = min_over(reduce_on, error.empty() ? 1 : 0);

  // Zeros from here: timed sums of zeros cost the same and cannot overflow.
  std::fill(host.begin(), host.end(), 0.0f);
  mem.upload(buf, host.data(), bytes);
  const int iters = iterations_for(bytes);
  comm.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) comm.all_reduce_sum(buf, count);
  mem.synchronize();
  const double t = max_over(reduce_on, seconds_since(t0) / iters);

  CommMeasurement m;
  m.group = label;
  m.op = "all-reduce";
  m.memory = mem.name();
  m.ranks = comm.size();
  m.bytes = bytes;
  m.iterations = iters;
  m.seconds = t;
  m.algbw = t > 0 ? double(bytes) / t / 1e9 : 0;
  m.busbw = m.algbw * allreduce_bus_factor(comm.size());
  if (!error.empty()) {  // this rank saw it: say so, with its own rank
    m.correct = false;
    m.error = "world rank " + std::to_string(world_rank) + " got wrong data: " + error;
    out.push_back(m);
  } else if (comm.rank() == 0) {
    m.correct = group_ok == 1;
    if (!m.correct) m.error = "another rank of the group got wrong data (see its line)";
    out.push_back(m);
  }
}

// One pair of a round: `me` is a (sends first, measures) or b (echoes).
void ping_pong(Comm& world, int a, int b, const std::string& label, uint64_t bytes,
               std::vector<CommMeasurement>& out) {
  const int me = world.rank();
  const bool first = me == a;
  const int peer = first ? b : a;
  std::vector<uint8_t> mine(bytes), got(bytes);
  for (size_t i = 0; i < bytes; ++i) mine[i] = p2p_byte(me, i);
  // One ping-pong: a -> b, then b -> a.
  const auto exchange = [&] {
    if (first) {
      world.send(mine.data(), bytes, peer);
      world.recv(got.data(), bytes, peer);
    } else {
      world.recv(got.data(), bytes, peer);
      world.send(mine.data(), bytes, peer);
    }
  };
  exchange();  // checked once, then timed
  const std::string error = p2p_error(got, peer);
  const int iters = iterations_for(bytes);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) exchange();
  const double one_way = seconds_since(t0) / iters / 2;
  uint8_t peer_ok = 1;
  const uint8_t my_ok = error.empty() ? 1 : 0;
  if (first)
    world.recv(&peer_ok, 1, peer);
  else
    world.send(&my_ok, 1, peer);

  CommMeasurement m;
  m.group = label;
  m.op = "send-recv";
  m.ranks = 2;
  m.bytes = bytes;
  m.iterations = iters;
  m.seconds = one_way;
  m.algbw = one_way > 0 ? double(bytes) / one_way / 1e9 : 0;
  m.busbw = m.algbw;
  if (!error.empty()) {
    m.correct = false;
    m.error = "world rank " + std::to_string(me) + " got wrong data from world rank " +
              std::to_string(peer) + ": " + error;
    out.push_back(m);
  } else if (first) {
    m.correct = peer_ok == 1;
    if (!m.correct) m.error = "world rank " + std::to_string(b) + " got wrong data (see its line)";
    out.push_back(m);
  }
}

}  // namespace

nlohmann::json to_json(const CommMeasurement& m) {
  nlohmann::json j = {{"group", m.group},           {"op", m.op},
                      {"memory", m.memory},         {"ranks", m.ranks},
                      {"bytes", m.bytes},           {"iterations", m.iterations},
                      {"time_us", m.seconds * 1e6}, {"algbw_gbs", m.algbw},
                      {"busbw_gbs", m.busbw},       {"correct", m.correct}};
  if (!m.error.empty()) j["error"] = m.error;
  return j;
}

CommMeasurement measurement_from_json(const nlohmann::json& j) {
  CommMeasurement m;
  m.group = j.at("group").get<std::string>();
  m.op = j.at("op").get<std::string>();
  m.memory = j.value("memory", std::string("host"));
  m.ranks = j.at("ranks").get<int>();
  m.bytes = j.at("bytes").get<uint64_t>();
  m.iterations = j.at("iterations").get<int>();
  m.seconds = j.at("time_us").get<double>() / 1e6;
  m.algbw = j.at("algbw_gbs").get<double>();
  m.busbw = j.at("busbw_gbs").get<double>();
  m.correct = j.at("correct").get<bool>();
  m.error = j.value("error", std::string());
  return m;
}

double allreduce_bus_factor(int ranks) {
  return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0.0;
}

int iterations_for(uint64_t bytes) {
  if (bytes <= (uint64_t(64) << 10)) return 20;
  if (bytes <= (uint64_t(4) << 20)) return 10;
  return 3;
}

std::vector<uint64_t> parse_comm_sizes(const std::string& list) {
  std::vector<uint64_t> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const uint64_t b = parse_byte_size(item, "--comm-sizes");
    if (b == 0 || b > (uint64_t(1) << 32))
      raise(Err::Usage, "--comm-sizes: " + item + " is not between 1 byte and 4 GiB");
    out.push_back((b + 3) / 4 * 4);
  }
  if (out.empty()) raise(Err::Usage, "--comm-sizes is empty", "e.g. --comm-sizes 8,1MiB,64MiB");
  return out;
}

std::vector<std::vector<std::pair<int, int>>> p2p_rounds(int tp, int pp) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (pp > 1) {
    for (int s = 0; s + 1 < pp; ++s) {
      rounds.emplace_back();
      for (int r = 0; r < tp; ++r) rounds.back().emplace_back(s * tp + r, (s + 1) * tp + r);
    }
  } else if (tp > 1) {
    rounds.emplace_back();
    for (int r = 0; r + 1 < tp; r += 2) rounds.back().emplace_back(r, r + 1);
  }
  return rounds;
}

std::unique_ptr<TestMemory> make_host_memory() {
  return std::make_unique<HostMemory>();
}

std::vector<CommMeasurement> run_comm_selftest(SelfTestSetup& s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != s.tp * s.pp)
    raise(Err::Internal, "comm self-test for --tp " + std::to_string(s.tp) + " --pp " +
                             std::to_string(s.pp) + " on " + std::to_string(size) + " ranks");
  std::vector<CommMeasurement> out;
  const int stage = rank / s.tp;
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, stage, rank % s.tp, &split);
  MpiCommHandle group(split);
  MpiComm world(MPI_COMM_WORLD, "world", s.host_of_rank, s.timeout_s);

  if (s.tp > 1) {
    const std::string label = "tp group " + std::to_string(stage) + " (" +
                              ranks_label(stage * s.tp, stage * s.tp + s.tp - 1) + ")";
    std::unique_ptr<Comm> tp =
        s.tp_comm ? s.tp_comm(group.get(), label)
                  : std::make_unique<MpiComm>(group.get(), label, s.host_of_rank, s.timeout_s);
    std::unique_ptr<TestMemory> mem = s.tp_memory ? std::move(s.tp_memory) : make_host_memory();
    for (uint64_t bytes : s.sizes)
      all_reduce_round(*tp, group.get(), *mem, label, rank, bytes, out);
  }
  for (const auto& round : p2p_rounds(s.tp, s.pp)) {
    for (uint64_t bytes : s.sizes) {
      for (const auto& [a, b] : round) {
        if (rank != a && rank != b) continue;
        const std::string pair = std::to_string(a) + " <-> " + std::to_string(b);
        const std::string label =
            s.pp > 1 ? "stage " + std::to_string(a / s.tp) + " -> " + std::to_string(b / s.tp) +
                           " tp rank " + std::to_string(a % s.tp) + " (world ranks " + pair + ")"
                     : "tp group 0 pair (world ranks " + pair + ")";
        ping_pong(world, a, b, label, bytes, out);
      }
      world.barrier();
    }
  }
  return out;
}

std::vector<Finding> comm_findings(const std::vector<CommMeasurement>& all) {
  // group + op -> its measurements, in first-seen order
  std::vector<std::pair<std::string, std::vector<const CommMeasurement*>>> groups;
  for (const CommMeasurement& m : all) {
    const std::string key = m.op + " " + m.group;
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&m);
  }
  std::vector<Finding> out;
  for (const auto& [key, ms] : groups) {
    const CommMeasurement& first = *ms.front();
    std::string bad;
    for (const CommMeasurement* m : ms)
      if (!m->correct) bad += (bad.empty() ? "" : "; ") + size_text(m->bytes) + ": " + m->error;
    if (!bad.empty()) {
      out.push_back(
          fail("comm", Err::CommWrongResult, first.op + " on " + first.group + ": " + bad));
      continue;
    }
    const CommMeasurement* small = ms.front();
    const CommMeasurement* big = ms.front();
    for (const CommMeasurement* m : ms) {
      if (m->bytes < small->bytes) small = m;
      if (m->bytes > big->bytes) big = m;
    }
    char line[256];
    std::snprintf(line, sizeof line, "%.1f us at %s, %s %.2f GB/s at %s", small->seconds * 1e6,
                  size_text(small->bytes).c_str(), first.op == "all-reduce" ? "busbw" : "bandwidth",
                  big->busbw, size_text(big->bytes).c_str());
    out.push_back(ok("comm", first.op + " on " + first.group + " (" + first.memory +
                                 " memory): correct at every size; " + line));
  }
  return out;
}

std::string comm_table(const std::vector<CommMeasurement>& all) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %-48s %-10s %10s %6s %12s %12s %12s  %s\n", "group", "op",
                "size", "iters", "time (us)", "algbw GB/s", "busbw GB/s", "data");
  out += line;
  for (const CommMeasurement& m : all) {
    std::snprintf(line, sizeof line, "  %-48s %-10s %10s %6d %12.1f %12.3f %12.3f  %s\n",
                  m.group.c_str(), m.op.c_str(), size_text(m.bytes).c_str(), m.iterations,
                  m.seconds * 1e6, m.algbw, m.busbw, m.correct ? "ok" : "WRONG");
    out += line;
  }
  return out;
}

}  // namespace qmpi::doctor
