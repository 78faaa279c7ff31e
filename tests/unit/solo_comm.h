// A TP group of one for tests that build a model without MPI: the all-reduces have nothing to
// add, the all-gather is a copy, and any point-to-point call is a test failure.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "parallel/comm.h"

namespace qmpi::testing {

class SoloComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "solo"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_gather(const void* s, void* r, size_t n) override { std::memcpy(r, s, n); }
  void broadcast(void*, size_t, int) override {}
  void send(const void*, size_t, int) override { ADD_FAILURE() << "send"; }
  void recv(void*, size_t, int) override { ADD_FAILURE() << "recv"; }
  void barrier() override {}
};

}  // namespace qmpi::testing
