// When the CUDA backend may multiply the bf16 copy an op wrote instead of converting x again
// (backend/cuda/bf16_handoff.h): the same array, and no device write since the copy was made.
#include "backend/cuda/bf16_handoff.h"

#include <gtest/gtest.h>

#include "backend/cuda/device_writes.h"

namespace qmpi::cuda {
namespace {

TEST(Bf16Handoff, HoldsOnlyTheStagedArrayAtItsGeneration) {
  float a[8] = {}, b[8] = {};
  Bf16Handoff h;
  EXPECT_FALSE(h.holds(a, 8, device_write_generation())) << "nothing staged yet";
  const uint64_t gen = note_device_write();
  h.stage(a, 8, gen);
  EXPECT_TRUE(h.holds(a, 8, gen));
  EXPECT_FALSE(h.holds(b, 8, gen)) << "another array";
  EXPECT_FALSE(h.holds(a + 1, 7, gen)) << "a part of it";
  EXPECT_FALSE(h.holds(a, 4, gen)) << "fewer elements (a GEMM of fewer rows)";
  EXPECT_FALSE(h.holds(a, 16, gen)) << "more elements than were rounded";
  EXPECT_FALSE(h.holds(a, 8, gen + 1)) << "written since";
}

TEST(Bf16Handoff, AnyDeviceWriteEndsTheCopy) {
  float a[4] = {};
  Bf16Handoff h;
  h.stage(a, 4, note_device_write());
  EXPECT_TRUE(h.holds(a, 4, device_write_generation()));
  const uint64_t before = device_write_generation();
  const uint64_t after = note_device_write();  // e.g. an all-reduce into some buffer
  EXPECT_EQ(after, before + 1);
  EXPECT_EQ(device_write_generation(), after);
  EXPECT_FALSE(h.holds(a, 4, device_write_generation()));
  // The next op that writes a and its copy makes it valid again.
  h.stage(a, 4, note_device_write());
  EXPECT_TRUE(h.holds(a, 4, device_write_generation()));
}

}  // namespace
}  // namespace qmpi::cuda
