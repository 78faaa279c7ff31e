#include "parallel/comm_mpi.h"

#include <algorithm>
#include <climits>
#include <iterator>
#include <numeric>

#include "core/errors.h"
#include "parallel/watchdog.h"

namespace qmpi {
namespace {

constexpr int kTag = 17;
// MPI counts are int: larger buffers go in pieces of this many elements.
constexpr size_t kMaxCount = size_t(1) << 30;

// f(offset, count) for each piece; an empty transfer is still one call, so a zero-length
// operation meets its peers all the same.
template <class F>
void in_chunks(size_t total, F&& f) {
  size_t done = 0;
  do {
    const int n = int(std::min(total - done, kMaxCount));
    f(done, n);
    done += n;
  } while (done < total);
}

std::string amount(size_t n, const char* unit) {
  return std::to_string(n) + " " + unit;
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm, std::string label, std::vector<std::string> host_of_world_rank,
                 double timeout_s)
    : label_(std::move(label)), hosts_(std::move(host_of_world_rank)), timeout_s_(timeout_s) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(comm, &dup);
  comm_ = MpiCommHandle(dup);
  MPI_Comm_rank(dup, &rank_);
  MPI_Comm_size(dup, &size_);

  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(dup, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(size_);
  std::iota(ranks.begin(), ranks.end(), 0);
  world_ranks_.resize(size_);
  MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_ranks_.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  may_fail_.assign(size_t(size_), false);
  for (int w : world_ranks_)
    if (w < 0 || w >= int(hosts_.size()))
      raise(Err::Internal, label_ + ": world rank " + std::to_string(w) + " has no host among " +
                               std::to_string(hosts_.size()));
}

void MpiComm::finish(MPI_Request& request, const Op& op, int peer, MPI_Status* status) {
  double waited = 0;
  if (wait_with_deadline(request, timeout_s_, waited, status)) return;
  TimeoutReport report;
  report.world_rank = world_ranks_[rank_];
  report.host = hosts_[report.world_rank];
  report.operation = op.name;
  if (op.unit) {
    report.operation += " (" + amount(op.amount, op.unit);
    if (op.root >= 0) report.operation += " from rank " + std::to_string(world_ranks_[op.root]);
    report.operation += ")";
  }
  report.group = label_;
  report.point_to_point = peer >= 0;
  report.waited_s = waited;
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && (peer < 0 || r == peer))
      report.peers.emplace_back(world_ranks_[r], hosts_[world_ranks_[r]]);
  const bool job_ending = job_end_cuts_waits();
  const Error timeout = job_ending ? job_end_error(report) : comm_timeout_error(report);
  if (job_ending || peer < 0 || !may_fail_[size_t(peer)]) abort_job(timeout);
  // The caller goes on without the peer: a late message must not land in a buffer it reuses.
  MPI_Cancel(&request);
  MPI_Request_free(&request);
  raise(Err::CommTimeout, timeout.message(), timeout.fix());
}

void MpiComm::allow_peer_failure(const std::vector<int>& peers) {
  for (int p : peers) {
    check_peer(p, "allow_peer_failure");
    may_fail_[size_t(p)] = true;
  }
}

void MpiComm::forget_peers(const std::vector<int>& peers) {
  const auto lost = [&](const PendingSend& p) {
    return std::find(peers.begin(), peers.end(), p.peer) != peers.end();
  };
  const auto gone = std::stable_partition(pending_.begin(), pending_.end(),
                                          [&](const auto& p) { return !lost(p); });
  std::move(gone, pending_.end(), std::back_inserter(abandoned_));
  pending_.erase(gone, pending_.end());
}

void MpiComm::check_peer(int peer, const char* operation) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    raise(Err::Internal, std::string(operation) + " on " + label_ + " with peer " +
                             std::to_string(peer) + " from rank " + std::to_string(rank_) + " of " +
                             std::to_string(size_));
}

void MpiComm::all_reduce_sum(float* data, size_t count) {
  const Op op{"all_reduce_sum", count, "floats"};
  in_chunks(count, [&](size_t done, int n) {
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, data + done, n, MPI_FLOAT, MPI_SUM, comm_.get(), &req);
    finish(req, op, -1);
  });
}

void MpiComm::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  if (bytes_per_rank > size_t(INT_MAX))
    raise(Err::Internal, "all_gather of " + amount(bytes_per_rank, "bytes") + " per rank on " +
                             label_ + " exceeds MPI's int count");
  const char* mine = static_cast<const char*>(recv) + size_t(rank_) * bytes_per_rank;
  const void* source = send == mine ? MPI_IN_PLACE : send;
  const int n = int(bytes_per_rank);
  MPI_Request req;
  MPI_Iallgather(source, n, MPI_BYTE, recv, n, MPI_BYTE, comm_.get(), &req);
  finish(req, Op{"all_gather", bytes_per_rank, "bytes per rank"}, -1);
}

void MpiComm::broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    raise(Err::Internal, "broadcast on " + label_ + " from root " + std::to_string(root) + " of " +
                             std::to_string(size_));
  const Op op{"broadcast", bytes, "bytes", root};
  in_chunks(bytes, [&](size_t done, int n) {
    MPI_Request req;
    MPI_Ibcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, comm_.get(), &req);
    finish(req, op, -1);
  });
}

void MpiComm::send(const void* data, size_t bytes, int peer) {
  check_peer(peer, "send");
  const Op op{"send", bytes, "bytes"};
  in_chunks(bytes, [&](size_t done, int n) {
    MPI_Request req;
    MPI_Isend(static_cast<const char*>(data) + done, n, MPI_BYTE, peer, kTag, comm_.get(), &req);
    finish(req, op, peer);
  });
}

void MpiComm::recv(void* data, size_t bytes, int peer) {
  check_peer(peer, "recv");
  const Op op{"recv", bytes, "bytes"};
  in_chunks(bytes, [&](size_t done, int n) {
    MPI_Request req;
    MPI_Status status;
    MPI_Irecv(static_cast<char*>(data) + done, n, MPI_BYTE, peer, kTag, comm_.get(), &req);
    finish(req, op, peer, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != n)
      raise(Err::Internal, "recv on " + label_ + " from world rank " +
                               std::to_string(world_ranks_[peer]) + " expected " +
                               amount(size_t(n), "bytes") + " but got " +
                               amount(size_t(got), "bytes"));
  });
}

void MpiComm::barrier() {
  MPI_Request req;
  MPI_Ibarrier(comm_.get(), &req);
  finish(req, Op{"barrier", 0, nullptr}, -1);
}

void MpiComm::drop_delivered() {
  std::erase_if(pending_, [](PendingSend& p) {
    int done = 0;
    MPI_Testall(int(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
}

void MpiComm::send_async(std::shared_ptr<const std::vector<uint8_t>> data, int peer) {
  check_peer(peer, "send_async");
  drop_delivered();
  PendingSend p{std::move(data), {}, peer};
  const size_t bytes = p.data->size();
  size_t done = 0;
  do {
    const int n = int(std::min(bytes - done, kMaxCount));
    MPI_Request req;
    MPI_Isend(p.data->data() + done, n, MPI_BYTE, peer, kTag, comm_.get(), &req);
    p.requests.push_back(req);
    done += size_t(n);
  } while (done < bytes);
  pending_.push_back(std::move(p));
}

void MpiComm::flush_sends() {
  for (PendingSend& p : pending_)
    for (MPI_Request& req : p.requests) finish(req, Op{"send", p.data->size(), "bytes"}, p.peer);
  pending_.clear();
}

// A comm torn down with sends still on their way (an error unwinding the engine) waits for them,
// within the timeout, so MPI never reads freed memory.
MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_.get() != MPI_COMM_NULL) flush_sends();
}

}  // namespace qmpi
