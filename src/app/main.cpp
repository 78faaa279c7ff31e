// qmpi: a thin main over libqmpi. Dispatches on the subcommand; catalogue errors become their
// rendered message and exit code.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/commands/commands.h"
#include "core/errors.h"
#include "core/logging.h"
#include "kernels/cpu/dot_products.h"
#include "parallel/launcher.h"

namespace {

struct Command {
  const char* name;
  int (*fn)(const qmpi::Args&);
  const char* help;
};

constexpr Command kCommands[] = {
    {"run", qmpi::cmd_run, "generate text for one prompt (streams to stdout)"},
    {"batch", qmpi::cmd_batch, "JSONL requests in, JSONL results out (continuous batching)"},
    {"serve", qmpi::cmd_serve, "online server: ZeroMQ broker and OpenAI-compatible HTTP API"},
    {"client", qmpi::cmd_client, "send one request to a running server, stream the text"},
    {"logits", qmpi::cmd_logits, "write the logits of every prompt position to a .npy file"},
    {"bench", qmpi::cmd_bench, "measure prefill and decode throughput and memory bandwidth"},
    {"plan", qmpi::cmd_plan, "pre-flight planner: which TP x PP layouts fit, and why"},
    {"doctor", qmpi::cmd_doctor, "check machine, MPI, GPUs, model files and comm before a run"},
    {"tokenize", qmpi::cmd_tokenize, "JSONL {\"text\"} -> {\"ids\"} with the model's tokenizer"},
    {"make-model", qmpi::cmd_make_model, "write a random-weight model in the Hugging Face layout"},
    {"make-lora", qmpi::cmd_make_lora, "write a random LoRA adapter (PEFT layout) for a model"},
    {"convert", qmpi::cmd_convert,
     "Hugging Face model folder -> one .h5 file for parallel loading"},
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "qmpi %s: Qwen inference across MPI ranks (tensor x pipeline parallel)\n\n"
               "usage: qmpi <command> [options]      (qmpi <command> --help for its options)\n"
               "       mpirun -np <tp*pp> qmpi <command> --tp <tp> --pp <pp> ...\n\ncommands:\n",
               QMPI_VERSION);
  for (const auto& c : kCommands) std::fprintf(to, "  %-12s %s\n", c.name, c.help);
  std::fprintf(to, "  %-12s %s\n", "help errors", "list every error qmpi reports, with its fix");
  std::fprintf(to, "  %-12s %s\n", "help QM102", "print one error's entry (its code or name)");
  std::fprintf(to,
               "\nlogging: --log-level debug|info|warn|error (listed in a command's --help), or "
               "QMPI_LOG_LEVEL; default info: rank 0 logs one start-up summary, debug adds every "
               "rank's own lines\n");
}

int run_command(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("qmpi %s\n%s\n", QMPI_VERSION, qmpi::cpu::dot_products_summary().c_str());
    return 0;
  }
  qmpi::init_logging();
  const std::string cmd = argv[1];
  qmpi::Args args(argv + 2, argv + argc);
  try {
    if (cmd == "help") {
      // `qmpi help errors QM150` reads as `qmpi help QM150`.
      if (args.size() == 2 && args[0] == "errors" && args[1][0] != '-')
        return qmpi::cmd_help_error(args[1]);
      if (!args.empty() && args[0] == "errors")
        return qmpi::cmd_help_errors({args.begin() + 1, args.end()});
      // `qmpi help QM102`: the one entry a message named, not the whole list.
      bool command = args.empty();
      for (const auto& c : kCommands) command = command || args[0] == c.name;
      if (!command) return qmpi::cmd_help_error(args[0]);
      usage(stdout);
      return 0;
    }
    for (const auto& c : kCommands)
      if (cmd == c.name) return c.fn(args);
    throw qmpi::Error(qmpi::Err::Usage, "unknown command '" + cmd + "'",
                      "Run `qmpi --help` for the list of commands.");
  } catch (const qmpi::Error& e) {
    std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qmpi: internal error: %s\n", e.what());
    return qmpi::error_entry(qmpi::Err::Internal).exit_code;
  }
}

}  // namespace

int main(int argc, char** argv) {
  qmpi::report_pid();
  const int rc = run_command(argc, argv);
  qmpi::report_exit_status(rc);
  return rc;
}
