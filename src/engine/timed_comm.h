// A Comm that forwards to another and adds up the seconds spent in it, so a step's time can be
// split into communication and compute (bench and the perf notes use it).
#pragma once
#include <chrono>

#include "parallel/comm.h"

namespace qmpi {

class TimedComm : public Comm {
 public:
  explicit TimedComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string describe() const override { return inner_.describe(); }
  void all_reduce_sum(float* d, size_t n) override {
    time([&] { inner_.all_reduce_sum(d, n); });
  }
  void all_gather(const void* s, void* r, size_t b) override {
    time([&] { inner_.all_gather(s, r, b); });
  }
  void broadcast(void* d, size_t b, int root) override {
    time([&] { inner_.broadcast(d, b, root); });
  }
  void send(const void* d, size_t b, int peer) override {
    time([&] { inner_.send(d, b, peer); });
  }
  void recv(void* d, size_t b, int peer) override {
    time([&] { inner_.recv(d, b, peer); });
  }
  void barrier() override {
    time([&] { inner_.barrier(); });
  }
  void send_async(std::shared_ptr<const std::vector<uint8_t>> d, int peer) override {
    time([&] { inner_.send_async(std::move(d), peer); });
  }
  void flush_sends() override {
    time([&] { inner_.flush_sends(); });
  }

  void allow_peer_failure(const std::vector<int>& peers) override {
    inner_.allow_peer_failure(peers);
  }
  void forget_peers(const std::vector<int>& peers) override { inner_.forget_peers(peers); }

  double seconds() const { return seconds_; }
  void reset() { seconds_ = 0.0; }

 private:
  template <class F>
  void time(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Comm& inner_;
  double seconds_ = 0.0;
};

}  // namespace qmpi
