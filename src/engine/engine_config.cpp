#include "engine/engine_config.h"

namespace qmpi {

std::string_view command_name(Command c) {
  switch (c) {
    case Command::Run:
      return "run";
    case Command::Logits:
      return "logits";
    case Command::Bench:
      return "bench";
    case Command::Batch:
      return "batch";
    case Command::Serve:
      return "serve";
  }
  return "run";
}

SchedulerConfig single_sequence_scheduler() {
  SchedulerConfig s;
  s.max_num_seqs = 1;
  s.max_batched_tokens = 0;
  s.prefix_caching = false;
  s.micro_batches = 1;
  return s;
}

std::string ModelSource::launch_arg() const {
  return synthetic_weights ? "--synthetic-weights --model-config " + config_path
                           : "--model " + path;
}

std::string EngineConfig::launch_command() const {
  std::string s(command_name(command));
  return command_args.empty() ? s : s + " " + command_args;
}

}  // namespace qmpi
