#include "core/error_docs.h"

#include "core/errors.h"

namespace qmpi {
namespace {

std::string section_title(Err code) {
  switch (unsigned(code) / 100) {
    case 1:
      return unsigned(code) < 150 ? "Layout and options" : "Memory";
    case 2:
      return "Model files";
    case 3:
      return "Tokenizer";
    case 4:
      return "Runtime and communication";
    case 5:
      return "Requests";
    case 6:
      return "Input and output files";
    default:
      return "Internal";
  }
}

}  // namespace

std::string error_catalogue_text() {
  std::string out;
  for (const auto& e : error_catalogue()) {
    out += error_id(e.code) + "  " + std::string(e.name) + "  (exit " +
           std::to_string(e.exit_code) + ")\n";
    out += "  " + std::string(e.summary) + "\n";
    out += "  seen as: " + std::string(e.symptom) + "\n";
    out += "  why:     " + std::string(e.why) + "\n";
    out += "  fix:     " + std::string(e.fix) + "\n\n";
  }
  return out;
}

std::string error_catalogue_markdown() {
  std::string out;
  std::string section;
  for (const auto& e : error_catalogue()) {
    const std::string title = section_title(e.code);
    if (title != section) {
      section = title;
      out += "## " + section + "\n\n";
    }
    out += "### " + error_id(e.code) + " " + std::string(e.name) + "\n\n";
    out += std::string(e.summary) + "\n\n";
    out += "- **You may see:** " + std::string(e.symptom) + "\n";
    out += "- **Why:** " + std::string(e.why) + "\n";
    out += "- **Fix:** " + std::string(e.fix) + "\n";
    out += "- **Exit code:** " + std::to_string(e.exit_code) + "\n\n";
  }
  if (out.ends_with("\n\n")) out.pop_back();
  return out;
}

}  // namespace qmpi
