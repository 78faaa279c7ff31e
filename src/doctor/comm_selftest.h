// The communication self-test of `qmpi doctor`, nccl-tests in miniature over the job's own mesh:
// an all-reduce in every TP group and a ping-pong between pipeline neighbours (the same TP rank
// of consecutive stages), each at a few sizes, timed and checked for correct data.
//
// Numbers, as nccl-tests defines them:
//   time   one operation, the slowest rank's average over the timed iterations; for send-recv
//          half a round trip (ping-pong), i.e. one transfer.
//   algbw  bytes / time (GB/s = 1e9 bytes per second).
//   busbw  all-reduce: algbw x 2(n-1)/n, what each link carries in a ring all-reduce, comparable
//          with the link's peak whatever n is; send-recv: algbw.
// With --pp 1 there are no pipeline neighbours: the send-recv test pairs TP ranks 0-1, 2-3, ...
// instead, so every job tests point-to-point transfers too.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor/finding.h"
#include "parallel/comm.h"

namespace qmpi::doctor {

struct CommMeasurement {
  std::string group;  // "tp group 0 (world ranks 0-5)", "stage 0 -> 1 (world ranks 1 -> 3)"
  std::string op;     // "all-reduce" or "send-recv"
  std::string memory = "host";  // where the buffers live: "host" or "cuda"
  int ranks = 0;
  uint64_t bytes = 0;
  int iterations = 0;
  double seconds = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  bool correct = true;
  std::string error;  // when !correct: which rank saw what
};

nlohmann::json to_json(const CommMeasurement& m);
CommMeasurement measurement_from_json(const nlohmann::json& j);

double allreduce_bus_factor(int ranks);  // 2(n-1)/n
// Timed iterations per size: many for latency-sized messages, few for 64 MiB.
int iterations_for(uint64_t bytes);
// "8,1MiB,64MiB" -> bytes, each rounded up to a whole number of floats. Error(Usage) when bad.
std::vector<uint64_t> parse_comm_sizes(const std::string& list);

// World-rank pairs of the send-recv test, in rounds: the pairs of a round are disjoint and run
// at the same time (as all TP ranks of a stage send at once); rounds run one after another.
std::vector<std::vector<std::pair<int, int>>> p2p_rounds(int tp, int pp);

// Buffers of the self-test: host memory for the MPI comm, device memory for NCCL.
class TestMemory {
 public:
  virtual ~TestMemory() = default;
  virtual std::string name() const = 0;   // "host", "cuda"
  virtual void* alloc(size_t bytes) = 0;  // owned by this object
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  virtual void synchronize() {}  // waits for the comm's queued work
};
std::unique_ptr<TestMemory> make_host_memory();

struct SelfTestSetup {
  int tp = 1, pp = 1;
  std::vector<uint64_t> sizes;
  double timeout_s = 60;
  std::vector<std::string> host_of_rank;  // world rank -> host, for timeout messages
  // The TP group's comm and its memory; default: an MpiComm over host memory.
  std::function<std::unique_ptr<Comm>(MPI_Comm group, const std::string& label)> tp_comm;
  std::unique_ptr<TestMemory> tp_memory;
};

// Collective over MPI_COMM_WORLD, whose size must be tp x pp. Returns what this rank recorded:
// the first rank of each TP group its group's all-reduces, the first rank of each pair its
// send-recvs, and any rank that received wrong data what it saw.
std::vector<CommMeasurement> run_comm_selftest(SelfTestSetup& setup);

// One finding per group and operation: OK with the headline numbers, FAIL CommWrongResult when
// any size delivered wrong data.
std::vector<Finding> comm_findings(const std::vector<CommMeasurement>& all);
// The nccl-tests style table of every measurement.
std::string comm_table(const std::vector<CommMeasurement>& all);

}  // namespace qmpi::doctor
