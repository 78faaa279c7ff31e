// The hub as the server uses it: front threads (broker, HTTP) submit and cancel while the
// engine loop takes, publishes and finishes on its own thread, a stats reader polls, and the
// abort path fails everything from yet another thread. Every request ends exactly once and the
// counts add up; scripts/tsan.sh runs this under ThreadSanitizer, which fails it on any access
// to the hub's state outside its lock.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "serve/request_hub.h"

namespace qmpi {
namespace {

using namespace std::chrono_literals;

// Counts what a request was told; a front's sink is called from the engine thread or, for
// fail_all, from the aborting thread.
class CountingSink final : public EventSink {
 public:
  void deliver(ServeEvent ev) override {
    std::lock_guard lock(mu_);
    (ev.kind == ServeEvent::Kind::Error ? errors_ : finals_) += 1;
  }
  int ends() const {
    std::lock_guard lock(mu_);
    return finals_ + errors_;
  }

 private:
  mutable std::mutex mu_;
  int finals_ = 0;
  int errors_ = 0;
};

ServeEvent final_event() {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Final;
  return e;
}

// The engine loop's part: takes work, ends each request once (a cancel ends it early), and
// publishes a snapshot per iteration, until the fronts are `done` and nothing is left.
void engine_loop(RequestHub& hub, const std::atomic<bool>& done, std::atomic<int>& ended) {
  std::map<uint64_t, std::shared_ptr<EventSink>> live;
  int64_t steps = 0;
  while (!done || !live.empty() || hub.queued() > 0) {
    RequestHub::Work w = hub.take(1ms);
    for (ServeRequest& r : w.requests) live[r.ticket] = r.sink;
    for (uint64_t t : w.cancels)
      if (auto it = live.find(t); it != live.end()) {
        it->second->deliver(final_event());
        hub.finished(t);
        live.erase(it);
        ++ended;
      }
    // One request ends per step, as generation would.
    if (!live.empty()) {
      auto it = live.begin();
      it->second->deliver(final_event());
      hub.finished(it->first);
      live.erase(it);
      ++ended;
    }
    EngineSnapshot s;
    s.health = Health::Ready;
    s.running = int64_t(live.size());
    s.free_seqs = 8;
    s.steps = ++steps;
    hub.publish(s);
  }
}

TEST(RequestHubThreads, FrontsEngineAndStatsReaderShareItSafely) {
  RequestHub hub(64);
  hub.set_health(Health::Ready);
  std::atomic<bool> fronts_done{false};
  std::atomic<int> ended{0};
  std::thread engine(engine_loop, std::ref(hub), std::cref(fronts_done), std::ref(ended));
  std::atomic<bool> stop_reader{false};
  int64_t last_steps = 0;
  std::thread reader([&] {
    while (!stop_reader) {
      const EngineSnapshot s = hub.snapshot();
      EXPECT_GE(s.steps, last_steps) << "snapshots go forward";
      last_steps = s.steps;
      EXPECT_GE(hub.queued(), 0);
    }
  });

  constexpr int kFronts = 3;
  constexpr int kPerFront = 300;
  std::vector<std::vector<std::shared_ptr<CountingSink>>> sinks(kFronts);
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> fronts;
  for (int f = 0; f < kFronts; ++f)
    fronts.emplace_back([&, f] {
      for (int i = 0; i < kPerFront; ++i) {
        auto sink = std::make_shared<CountingSink>();
        ServeRequest r;
        r.sink = sink;
        try {
          const uint64_t ticket = hub.submit(std::move(r));
          sinks[size_t(f)].push_back(sink);
          ++accepted;
          if (i % 5 == 0) hub.cancel(ticket);  // a client that hangs up
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), Err::Busy);
          ++refused;
        }
      }
    });
  for (std::thread& t : fronts) t.join();
  fronts_done = true;
  engine.join();
  stop_reader = true;
  reader.join();

  EXPECT_EQ(accepted + refused, kFronts * kPerFront);
  EXPECT_GT(accepted.load(), 0);
  EXPECT_EQ(ended.load(), accepted.load()) << "every accepted request ended once";
  for (const auto& front : sinks)
    for (const auto& sink : front) EXPECT_EQ(sink->ends(), 1);
}

TEST(RequestHubThreads, FailAllFromAnotherThreadEndsWhatIsLiveAndRefusesTheRest) {
  RequestHub hub(1000);
  hub.set_health(Health::Ready);
  std::vector<std::shared_ptr<CountingSink>> sinks;
  std::mutex sinks_mu;
  std::atomic<bool> failed{false};
  std::vector<std::thread> fronts;
  for (int f = 0; f < 2; ++f)
    fronts.emplace_back([&] {
      for (int i = 0; i < 400; ++i) {
        auto sink = std::make_shared<CountingSink>();
        ServeRequest r;
        r.sink = sink;
        const bool after = failed;
        try {
          hub.submit(std::move(r));
          EXPECT_FALSE(after) << "a request got in after fail_all had returned";
          std::lock_guard lock(sinks_mu);
          sinks.push_back(sink);
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), Err::Busy);
        }
      }
    });
  std::thread aborter([&] {
    std::this_thread::sleep_for(2ms);
    hub.fail_all(Error(Err::CommTimeout, "rank 3 stopped answering"));
    failed = true;
  });
  for (std::thread& t : fronts) t.join();
  aborter.join();
  // Nothing took the requests: fail_all is what ended each one that got in.
  for (const auto& sink : sinks) EXPECT_EQ(sink->ends(), 1);
  EXPECT_EQ(hub.snapshot().health, Health::Draining);
  EXPECT_THROW(hub.submit(ServeRequest{}), Error) << "no request gets in after fail_all";
}

}  // namespace
}  // namespace qmpi
