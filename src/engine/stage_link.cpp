#include "engine/stage_link.h"

#include <cstring>
#include <memory>

namespace qmpi {

StageLink::StageLink(const MeshPosition& pos, Comm& world, Backend& backend)
    : pos_(pos), world_(world), be_(backend) {}

// Sent without waiting: a plan may be larger than MPI's eager limit, and a blocking send would
// hold this rank until the next stage has finished its current step, undoing the pipeline. A
// result likewise: rank 0 may be busy sending this stage's next input down the pipeline, and a
// blocking send would close the loop into a deadlock.
void StageLink::send_message(std::vector<uint8_t> bytes, const std::vector<int>& to) {
  if (to.empty()) return;
  const auto body = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const uint64_t n = body->size();
  std::vector<uint8_t> head(sizeof n);
  std::memcpy(head.data(), &n, sizeof n);
  const auto head_msg = std::make_shared<const std::vector<uint8_t>>(std::move(head));
  for (int peer : to) {
    world_.send_async(head_msg, peer);
    world_.send_async(body, peer);
  }
}

std::vector<uint8_t> StageLink::recv_message(int from) {
  uint64_t n = 0;
  world_.recv(&n, sizeof n, from);
  std::vector<uint8_t> bytes(n);
  world_.recv(bytes.data(), n, from);
  return bytes;
}

void StageLink::send_plan(std::vector<uint8_t> bytes) {
  std::vector<int> to;
  if (pos_.rank == 0)
    for (int t = 1; t < pos_.tp; ++t) to.push_back(t);  // the first stage's other TP ranks
  if (pos_.next_stage_rank >= 0) to.push_back(pos_.next_stage_rank);
  send_message(std::move(bytes), to);
}

std::vector<uint8_t> StageLink::recv_plan() {
  return recv_message(pos_.stage == 0 ? 0 : pos_.prev_stage_rank);
}

void StageLink::send_hidden(const float* hidden, size_t bytes) {
  if (be_.host_memory()) return world_.send(hidden, bytes, pos_.next_stage_rank);
  staging_.resize(bytes);
  be_.copy_to_host(staging_.data(), hidden, bytes);
  world_.send(staging_.data(), bytes, pos_.next_stage_rank);
}

void StageLink::recv_hidden(float* hidden, size_t bytes) {
  if (be_.host_memory()) return world_.recv(hidden, bytes, pos_.prev_stage_rank);
  staging_.resize(bytes);
  world_.recv(staging_.data(), bytes, pos_.prev_stage_rank);
  be_.copy_to_device(hidden, staging_.data(), bytes);
}

void StageLink::send_result(std::vector<uint8_t> bytes) {
  send_message(std::move(bytes), {0});
}

std::vector<uint8_t> StageLink::recv_result() {
  return recv_message(pos_.result_rank);
}

void StageLink::send_plan_to_replica(std::vector<uint8_t> bytes, int replica) {
  std::vector<int> to;
  for (int t = 0; t < pos_.tp; ++t) to.push_back(pos_.replica_base(replica) + t);
  send_message(std::move(bytes), to);
}

std::vector<uint8_t> StageLink::recv_result_from_replica(int replica) {
  return recv_message(pos_.replica_result_rank(replica));
}

void StageLink::forget_replica(int replica) {
  std::vector<int> ranks(size_t(pos_.pp * pos_.tp));
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = pos_.replica_base(replica) + int(i);
  world_.forget_peers(ranks);
}

}  // namespace qmpi
