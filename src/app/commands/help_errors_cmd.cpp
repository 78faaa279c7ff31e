// `qmpi help errors [--markdown]`: the error catalogue, as text or as the generated body of
// docs/troubleshooting.md; `qmpi help QM102`: one entry of it.
#include <cstdio>

#include "app/commands/commands.h"
#include "app/commands/options.h"
#include "core/error_docs.h"

namespace qmpi {

int cmd_help_errors(const Args& args) {
  bool markdown = false;
  po::options_description desc("help errors");
  desc.add_options()("markdown", po::bool_switch(&markdown),
                     "print the troubleshooting page body (docs/troubleshooting.md below its "
                     "marker line)");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi help errors [--markdown]")) return 0;
  const std::string text = markdown ? error_catalogue_markdown() : error_catalogue_text();
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

int cmd_help_error(const std::string& code_or_name) {
  const std::string text = error_help(code_or_name);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace qmpi
