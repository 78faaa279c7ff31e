// SHA-256 digests and the sha256sum manifest format.
#include "doctor/sha256.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"
#include "core/errors.h"

namespace qmpi::doctor {
namespace {

TEST(Sha256, KnownDigests) {  // FIPS 180-2 test vectors
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FileDigestEqualsTheDigestOfItsBytesAcrossReadChunks) {
  testing::TempDir dir;
  std::string data(20 << 20, '\0');  // more than one 8 MiB read
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 7 + i / 4096);
  std::ofstream(dir.file("f.bin"), std::ios::binary) << data;
  uint64_t bytes = 0;
  EXPECT_EQ(sha256_file(dir.file("f.bin"), &bytes), sha256_hex(data));
  EXPECT_EQ(bytes, data.size());
  try {
    sha256_file(dir.file("absent"));
    FAIL() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::InputFile);
  }
}

TEST(Sha256, ManifestTakesTextAndBinaryModeLinesAndSkipsComments) {
  const std::string h(64, 'A');
  const auto entries = parse_sha256_manifest("# written by sha256sum\n" + h +
                                                 "  model-00001-of-00002.safetensors\n\n" +
                                                 std::string(64, 'b') + " *config.json\r\n",
                                             "SUMS");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].sha256, std::string(64, 'a'));  // lower-cased
  EXPECT_EQ(entries[0].file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(entries[1].file, "config.json");
}

TEST(Sha256, MalformedManifestLineNamesTheLine) {
  for (const std::string& bad :
       std::vector<std::string>{"abc  file\n", std::string(64, 'a') + "\tfile\n", "\n"}) {
    try {
      parse_sha256_manifest(bad, "SUMS");
      FAIL() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::InputFile);
      EXPECT_NE(e.message().find("SUMS"), std::string::npos) << e.message();
    }
  }
}

}  // namespace
}  // namespace qmpi::doctor
