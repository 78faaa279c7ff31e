// A group of one: what a model built for a single rank is given as its TP comm (a draft model on
// rank 0, tests). With one member the all-reduces have nothing to add and the all-gather is a
// copy; there is no peer to send to, so a point-to-point call is a bug.
#pragma once
#include <cstring>
#include <string>

#include "core/errors.h"
#include "parallel/comm.h"

namespace qmpi {

class SoloComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "a group of one"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_gather(const void* s, void* r, size_t n) override { std::memcpy(r, s, n); }
  void broadcast(void*, size_t, int) override {}
  void send(const void*, size_t, int) override { no_peer("send"); }
  void recv(void*, size_t, int) override { no_peer("recv"); }
  void barrier() override {}

 private:
  [[noreturn]] static void no_peer(const char* op) {
    raise(Err::Internal, std::string(op) + " on a comm of one rank, which has no peer");
  }
};

}  // namespace qmpi
