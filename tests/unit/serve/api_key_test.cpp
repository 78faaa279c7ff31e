// Issue 19, item 7: the API key can come from a file or the environment (not only the command
// line, where `ps` shows it), one source at a time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"
#include "core/errors.h"
#include "serve/api_key.h"

namespace qmpi {
namespace {

using testing::TempDir;

Err code_of(const ApiKeySources& s) {
  try {
    resolve_api_key(s);
  } catch (const Error& e) {
    return e.code();
  }
  return Err::Internal;  // accepted
}

TEST(ApiKey, FromTheOptionAFileOrTheEnvironment) {
  TempDir dir;
  std::ofstream(dir.file("key")) << "  s3cret-key\n";
  EXPECT_EQ(resolve_api_key({}), "");
  EXPECT_EQ(resolve_api_key({"k1", "", nullptr}), "k1");
  EXPECT_EQ(resolve_api_key({"", dir.file("key"), nullptr}), "s3cret-key");
  EXPECT_EQ(resolve_api_key({"", "", "from-env"}), "from-env");
  EXPECT_EQ(resolve_api_key({"", "", ""}), "") << "an empty variable is no key";
  EXPECT_EQ(resolve_api_key({"k1", "", "from-env"}), "k1") << "an option beats the environment";
  EXPECT_EQ(resolve_api_key({"", dir.file("key"), "from-env"}), "s3cret-key");
}

TEST(ApiKey, RefusesAmbiguousEmptyOrUnusableKeys) {
  TempDir dir;
  std::ofstream(dir.file("key")) << "k\n";
  std::ofstream(dir.file("empty")) << "\n\n";
  std::ofstream(dir.file("spaced")) << "two words\n";
  EXPECT_EQ(code_of({"k1", dir.file("key"), nullptr}), Err::Usage);
  EXPECT_EQ(code_of({"", dir.file("missing"), nullptr}), Err::Usage);
  EXPECT_EQ(code_of({"", dir.file("empty"), nullptr}), Err::Usage);
  EXPECT_EQ(code_of({"", dir.file("spaced"), nullptr}), Err::Usage);
  EXPECT_EQ(code_of({"tab\tkey", "", nullptr}), Err::Usage);
}

}  // namespace
}  // namespace qmpi
