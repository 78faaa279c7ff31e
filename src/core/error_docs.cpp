#include "core/error_docs.h"

#include <cctype>

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

std::string error_entry_text(const ErrorEntry& e) {
  return error_id(e.code) + "  " + std::string(e.name) + "  (exit " + std::to_string(e.exit_code) +
         ")\n" + "  " + std::string(e.summary) + "\n" + "  seen as: " + std::string(e.symptom) +
         "\n" + "  why:     " + std::string(e.why) + "\n" + "  fix:     " + std::string(e.fix) +
         "\n";
}

std::string error_catalogue_text() {
  std::string out;
  for (const auto& e : error_catalogue()) out += error_entry_text(e) + "\n";
  return out;
}

std::string error_help(std::string_view asked) {
  std::string lower(asked);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& e : error_catalogue()) {
    std::string id = error_id(e.code);
    for (char& c : id) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (lower == id || lower == e.name) return error_entry_text(e);
  }
  // Codes that were in the catalogue once: a message or a page from an older qmpi names them.
  if (lower == "qm103" || lower == "qm104")
    raise(Err::Usage,
          std::string(asked.substr(0, 8)) +
              " is retired: any --tp up to num_attention_heads runs, "
              "divisible or not",
          "Read `qmpi help QM102` (tp-exceeds-heads).");
  raise(Err::Usage, "\"" + std::string(asked.substr(0, 64)) + "\" is no error code or name of qmpi",
        "Run `qmpi help errors` for the list (codes look like QM102, names like "
        "tp-exceeds-heads).");
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
