#include "engine/context_limit.h"

#include <gtest/gtest.h>

#include "../expect_error.h"

namespace qmpi {
namespace {

TEST(ContextLimit, RefusesPastTheLimitNamingIt) {
  check_context_fits(4000, 96, 4096);  // exactly the limit fits
  testing::expect_error([] { check_context_fits(4000, 97, 4096); }, Err::PromptTooLong,
                        {"maximum context length is 4096 tokens", "--max-model-len",
                         "the prompt has 4000 tokens", "97 more", "4097 in all"});
  testing::expect_error([] { check_context_fits(4097, 0, 4096); }, Err::PromptTooLong, {"4096"});
}

}  // namespace
}  // namespace qmpi
