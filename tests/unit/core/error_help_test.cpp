// `qmpi help QM102` prints that one entry: found by code (any case) or by name, the text
// `qmpi help errors` prints for it; a retired or unknown code is a usage error saying so.
#include <gtest/gtest.h>

#include "core/error_docs.h"
#include "core/errors.h"

namespace qmpi {
namespace {

Error error_of(std::string_view asked) {
  try {
    error_help(asked);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "found: " << asked;
  return Error(Err::Internal, "");
}

TEST(ErrorHelp, PrintsTheOneEntryByCodeOrName) {
  const std::string text = error_help("QM102");
  EXPECT_EQ(text, error_entry_text(error_entry(Err::TpExceedsHeads)));
  EXPECT_EQ(text.rfind("QM102  tp-exceeds-heads", 0), 0u) << text;
  EXPECT_NE(text.find("fix:"), std::string::npos);
  EXPECT_EQ(text.find("QM100"), std::string::npos) << "only that entry";
  EXPECT_EQ(error_help("qm102"), text);
  EXPECT_EQ(error_help("tp-exceeds-heads"), text);
  EXPECT_NE(error_catalogue_text().find(text), std::string::npos)
      << "the same text as in `qmpi help errors`";
}

TEST(ErrorHelp, EveryCatalogueCodeIsFound) {
  for (const auto& e : error_catalogue())
    EXPECT_EQ(error_help(error_id(e.code)), error_entry_text(e)) << error_id(e.code);
}

TEST(ErrorHelp, RetiredAndUnknownCodesAreUsageErrors) {
  const Error retired = error_of("QM103");
  EXPECT_EQ(retired.code(), Err::Usage);
  EXPECT_NE(retired.message().find("retired"), std::string::npos) << retired.message();
  EXPECT_NE(retired.fix().find("QM102"), std::string::npos);
  const Error unknown = error_of("QM777");
  EXPECT_EQ(unknown.code(), Err::Usage);
  EXPECT_NE(unknown.fix().find("qmpi help errors"), std::string::npos);
}

}  // namespace
}  // namespace qmpi
