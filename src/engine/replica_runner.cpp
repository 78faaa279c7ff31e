#include "engine/replica_runner.h"

#include <string>

#include "core/errors.h"

namespace qmpi {

ReplicaRunner::ReplicaRunner(const Executor& driver, Comm& world, Backend& backend, int replica)
    : driver_(driver), link_(driver.position(), world, backend), replica_(replica) {}

StepResult ReplicaRunner::run(const StepPlan& plan) {
  submit(plan);
  return collect();
}

void ReplicaRunner::submit(const StepPlan& plan) {
  if (in_flight_ >= size_t(depth()))
    raise(Err::Internal, "replica " + std::to_string(replica_) + ": submit with " +
                             std::to_string(in_flight_) + " steps in flight");
  StepPlan p = plan;
  p.valid_vocab = driver_.valid_vocab();
  link_.send_plan_to_replica(encode_step_plan(p), replica_);
  ++in_flight_;
}

StepResult ReplicaRunner::collect() {
  if (in_flight_ == 0)
    raise(Err::Internal,
          "replica " + std::to_string(replica_) + ": collect with no step in flight");
  --in_flight_;
  return decode_step_result(link_.recv_result_from_replica(replica_));
}

void ReplicaRunner::abandon() {
  lost_ = true;
  in_flight_ = 0;
  link_.forget_replica(replica_);
}

void ReplicaRunner::shutdown() {
  if (lost_) return;
  while (in_flight_ > 0) collect();
  StepPlan p;
  p.shutdown = true;
  link_.send_plan_to_replica(encode_step_plan(p), replica_);
}

}  // namespace qmpi
