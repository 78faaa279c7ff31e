// The hub's admission: --max-queue counts only the requests waiting beyond the engine's free
// sequence slots, so a burst that the running batch can take is never refused as busy.
#include "serve/request_hub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qmpi {
namespace {

void submit(RequestHub& hub) {
  hub.submit(ServeRequest{});
}

void expect_busy(RequestHub& hub, const std::string& why) {
  try {
    submit(hub);
    ADD_FAILURE() << why;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Busy) << why;
    EXPECT_THAT(e.message(), ::testing::HasSubstr("--max-queue 2")) << why;
  }
}

EngineSnapshot ready(int64_t free_seqs, int64_t waiting = 0, int64_t running = 0) {
  EngineSnapshot s;
  s.health = Health::Ready;
  s.free_seqs = free_seqs;
  s.waiting = waiting;
  s.running = running;
  return s;
}

TEST(RequestHub, BeforeTheEngineIsUpOnlyTheQueueCounts) {
  RequestHub hub(2);
  submit(hub);
  submit(hub);
  expect_busy(hub, "a third request fit a queue of 2 with no slot known");
}

TEST(RequestHub, FreeSlotsTakeABurstBeyondTheQueue) {
  RequestHub hub(2);
  hub.set_health(Health::Ready);
  hub.publish(ready(5));
  for (int i = 0; i < 7; ++i) submit(hub);  // 5 slots, then 2 queued
  expect_busy(hub, "an eighth request fit 5 free slots and a queue of 2");
  // Taken by the engine loop, not yet started: still waiting, still counted against the slots.
  EXPECT_EQ(hub.take(std::chrono::microseconds(0)).requests.size(), 7u);
  expect_busy(hub, "a request slipped in between take() and publish()");
  // The next step started 5 of them; 2 wait for a slot: the queue is full.
  hub.publish(ready(0, 2, 5));
  expect_busy(hub, "a request fit a full queue behind a full batch");
  // Two finished: their slots are free again.
  hub.publish(ready(2, 2, 3));
  submit(hub);
  submit(hub);
  expect_busy(hub, "a request fit past the free slots and the queue");
}

}  // namespace
}  // namespace qmpi
