// Rank 0's StepRunner for a data-parallel replica other than its own: each plan goes to that
// replica's first stage and its result comes back from that replica's last stage, over the world
// comm, while rank 0 computes its own replica's steps. Up to pp steps may be in flight, as on
// rank 0's own pipeline. The plan carries rank 0's valid vocabulary, as Executor::submit's do.
#pragma once
#include <cstddef>

#include "engine/executor.h"
#include "engine/scheduler.h"
#include "engine/stage_link.h"

namespace qmpi {

class ReplicaRunner final : public StepRunner {
 public:
  // `driver` is rank 0's Executor (its position and valid vocabulary); `world` its world comm;
  // `replica` >= 1.
  ReplicaRunner(const Executor& driver, Comm& world, Backend& backend, int replica);

  StepResult run(const StepPlan& plan) override;
  int depth() const override { return driver_.position().pp; }
  void submit(const StepPlan& plan) override;
  StepResult collect() override;

  int replica() const { return replica_; }
  size_t in_flight() const { return in_flight_; }
  // The replica is lost: forgets its steps in flight and the messages on their way to it.
  void abandon() override;
  // Before the mesh shuts down: collects and drops the results of the steps still in flight, so
  // that the replica's last stage finishes its sends, then ends its ranks' serve(). Nothing for a
  // lost replica.
  void shutdown();

 private:
  const Executor& driver_;
  StageLink link_;
  int replica_;
  size_t in_flight_ = 0;
  bool lost_ = false;
};

}  // namespace qmpi
