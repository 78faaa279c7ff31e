// vLLM's command-line flags on qmpi's commands (docs/vllm-compat.md): a `vllm serve` or
// `vllm run-batch` command line runs as typed on `qmpi serve` / `qmpi batch`. Each vLLM flag a
// command lacks is renamed to the qmpi option that does the same, dropped when it asks for what
// qmpi does anyway, or dropped with one note saying what qmpi does instead.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "app/commands/commands.h"

namespace qmpi {

enum class VllmFlagUse {
  Rename,   // the same option under qmpi's name (`qmpi` below)
  Default,  // asks for what qmpi does anyway: dropped
  Noted,    // qmpi does something else: dropped with `note` logged at start-up
};

enum class VllmFlagArgs { None, One, Many };  // a switch, one value, values up to the next flag

struct VllmFlag {
  std::string_view name;  // as vLLM spells it, "--swap-space" or "-tp"
  VllmFlagUse use;
  VllmFlagArgs args;
  std::string_view qmpi;  // Rename: qmpi's option; otherwise a short note of what qmpi does
};

// Every vLLM flag qmpi knows (tests and docs/vllm-compat.md read it).
const std::vector<VllmFlag>& vllm_flags();

struct VllmRewrite {
  Args args;                         // what Boost parses: qmpi's names only
  std::vector<std::string> notes;    // one per Noted flag given: "--swap-space 4: ..."
  std::vector<std::string> unknown;  // "--foo (closest: --bar)" for each flag neither knows
};

// `args` for a command whose options are `desc`: a table entry applies only where the command
// has no option of that name (serve's own --disable-log-stats wins over the batch note).
VllmRewrite with_vllm_aliases(const Args& args,
                              const boost::program_options::options_description& desc);

}  // namespace qmpi
