// What a request's "model" selects: a LoRA adapter by its name, the base model by one of its
// served names or none, and 404 model_not_found (naming what is served) for anything else.
#include "requests/served_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../expect_error.h"

namespace qmpi {
namespace {

TEST(ServedModel, AdapterNamesSelectTheirIndexBaseNamesNone) {
  const std::vector<std::string> names{"qwen", "/models/qwen"};
  const std::vector<std::string> adapters{"sql", "chat"};
  EXPECT_EQ(check_served_model("", names, adapters), -1);
  EXPECT_EQ(check_served_model("qwen", names, adapters), -1);
  EXPECT_EQ(check_served_model("/models/qwen", names, adapters), -1);
  EXPECT_EQ(check_served_model("sql", names, adapters), 0);
  EXPECT_EQ(check_served_model("chat", names, adapters), 1);
  testing::expect_error([&] { check_served_model("Sql", names, adapters); }, Err::ModelNotFound,
                        {"\"Sql\"", "\"qwen\"", "\"sql\"", "\"chat\""});
}

TEST(ServedModel, WithoutServedNamesOnlyAdaptersAreSpecial) {
  const std::vector<std::string> adapters{"sql"};
  EXPECT_EQ(check_served_model("anything", {}, adapters), -1);  // run, logits: any name is base
  EXPECT_EQ(check_served_model("sql", {}, adapters), 0);
  EXPECT_EQ(check_served_model("sql", {}, {}), -1);
}

}  // namespace
}  // namespace qmpi
