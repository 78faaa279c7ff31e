// Stop strings on detokenized text: found across token boundaries, never partly released, and
// cut from the output. Uses a byte-level tokenizer whose ids 0..255 are the bytes, so one token
// is one byte and any split can be made.
#include <gtest/gtest.h>

#include "../text/text_test_util.h"
#include "requests/stop_strings.h"

namespace qmpi {
namespace {

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({{"<", "/"}, {"e", "n"}}));
  return t;
}

struct Fed {
  std::vector<std::string> pieces;  // what push() released, token by token
  std::string text;
  bool stopped = false;
};

Fed feed(const std::vector<int32_t>& ids, std::vector<std::string> stops) {
  StopStringMatcher m(bytes_tokenizer(), std::move(stops));
  Fed r;
  for (int32_t id : ids) {
    r.pieces.push_back(m.push(id));
    if (m.stopped()) break;
  }
  r.pieces.push_back(m.finish());
  r.text = m.text();
  r.stopped = m.stopped();
  return r;
}

std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(StopStrings, FoundAcrossTokensAndCutFromTheText) {
  const Fed r = feed(bytes_of("hello</end> and more"), {"</end>"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hello");
  std::string joined;
  for (const auto& p : r.pieces) joined += p;
  EXPECT_EQ(joined, "hello");
}

TEST(StopStrings, MultiByteTokensAndSeveralStops) {
  // "<" + "/" and "e" + "n" are merged tokens (256, 257): the stop spans token boundaries.
  const auto& t = bytes_tokenizer();
  const Fed r = feed(t.encode("abc</end>x"), {"zzz", "/en"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "abc<");
  // The earliest stop string wins, whichever is listed first.
  EXPECT_EQ(feed(bytes_of("xx STOP yy END"), {"END", "STOP"}).text, "xx ");
}

TEST(StopStrings, PiecesNeverShowPartOfAStopString) {
  const std::string stop = "STOP";
  const Fed r = feed(bytes_of("aSTb STOx S ST STO STOP tail"), {stop});
  EXPECT_EQ(r.text, "aSTb STOx S ST STO ");
  for (const auto& p : r.pieces) EXPECT_EQ(p.find(stop), std::string::npos) << p;
  // Held-back prefixes come out as soon as they cannot become the stop string.
  EXPECT_EQ(r.pieces[0], "a");
  EXPECT_EQ(r.pieces[1], "");  // "S" could start STOP
  EXPECT_EQ(r.pieces[2], "");  // "ST"
  EXPECT_EQ(r.pieces[3], "STb") << "released once 'b' arrived";
}

TEST(StopStrings, NoMatchReleasesEverythingAtTheEnd) {
  const Fed r = feed(bytes_of("ends with STO"), {"STOP"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "ends with STO");
  EXPECT_EQ(r.pieces.back(), "STO");
}

TEST(StopStrings, SplitCharactersAreNotReleasedEarly) {
  // U+00E9 is two tokens here (C3 A9); the first alone releases nothing.
  const Fed r = feed({'a', 0xC3, 0xA9, 'b'}, {"\u00E9b"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  const Fed plain = feed({'a', 0xC3, 0xA9, 'b'}, {});
  EXPECT_EQ(plain.pieces[1], "");
  EXPECT_EQ(plain.text, "a\u00E9b");
}

}  // namespace
}  // namespace qmpi
