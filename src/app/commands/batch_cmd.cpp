// qmpi batch: a JSONL file of requests in, one result line per request out (docs/batch.md).
// Every rank starts the engine; rank 0 runs the job over the continuous-batching scheduler and
// the others serve its steps.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "app/commands/lora_options.h"
#include "app/commands/options.h"
#include "app/commands/prompt_input.h"
#include "batch/batch_job.h"
#include "batch/batch_preflight.h"
#include "core/byte_size.h"
#include "engine/replica_scheduler.h"
#include "parallel/launcher.h"
#include "parallel/signals.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace qmpi {
namespace {

std::string model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The command line again, to run after a stop: --resume instead of --overwrite.
std::string resume_command(const Args& args) {
  std::string line = "batch";
  for (const std::string& a : args)
    if (a != "--overwrite" && a != "--resume")
      line += " " + (a.find_first_of(" \t'\"$") == std::string::npos ? a : "'" + a + "'");
  return line + " --resume";
}

// The batch options, bound to `job` and the values cmd_batch checks before filling it in.
po::options_description batch_options(BatchJobOptions& job, std::string& max_line,
                                      std::vector<std::string>& served_names,
                                      std::string& progress) {
  po::options_description b("batch");
  b.add_options()(
      "input", po::value(&job.input)->required(),
      "JSONL requests: OpenAI Batch API lines or {\"id\", \"prompt\"|\"messages\", ...}")(
      "output", po::value(&job.output)->required(), "JSONL results, one line per input line")(
      "output-h5", po::value(&job.output_h5),
      "also write token ids, logprobs and timings to this HDF5 file")(
      "ordered", po::bool_switch(&job.ordered),
      "write results in input order (default: as they finish)")(
      "resume", po::bool_switch(&job.resume),
      "carry on with an earlier run: skip the ids already in --output and append")(
      "overwrite", po::bool_switch(&job.overwrite), "replace an existing --output")(
      "token-ids", po::bool_switch(&job.token_ids),
      "add prompt_token_ids and each choice's token_ids to the results")(
      "served-model-name", po::value(&served_names)->multitoken(),
      "names a request's \"model\" may give, as in serve: a line naming another model is an "
      "error line (model-not-found); the first is \"model\" in responses of requests that name "
      "none (default: the model folder's name, and --model as written)")(
      "fsync-interval", decimal_value(&job.fsync_interval_s, 2.0),
      "seconds between fsyncs of the results")("progress-interval",
                                               decimal_value(&job.progress_interval_s, 5.0),
                                               "seconds between progress lines")(
      "progress", po::value(&progress)->default_value("auto"),
      "bar (redrawn in place), lines (one every --progress-interval), off (the summary only), "
      "or auto: a bar on a terminal, else lines (under mpirun rank 0's stderr is no terminal: "
      "give bar for one)")(
      "max-line-bytes", po::value(&max_line)->default_value("16MiB"),
      "longest input line (a size: 16MiB, 65536); a longer line is read past, not held, and "
      "answered with a QM506 error record");
  return b;
}

// The batch options checked and completed: limits, progress display, the names the model
// answers to (and the LoRA adapters' beside them).
void finish_batch_options(BatchJobOptions& job, const std::string& max_line,
                          const std::string& progress, std::vector<std::string>& served_names,
                          EngineConfig& config) {
  if (job.resume && job.overwrite) raise(Err::Usage, "give --resume or --overwrite, not both");
  if (job.fsync_interval_s <= 0) raise(Err::Usage, "--fsync-interval must be positive");
  job.max_line_bytes = size_t(parse_byte_size(max_line, "--max-line-bytes"));
  if (job.max_line_bytes == 0) raise(Err::Usage, "--max-line-bytes must be positive");
  job.default_max_tokens = config.default_max_tokens;
  if (served_names.empty()) {
    served_names = {model_name(config.model.path)};
    if (config.model.path != served_names[0]) served_names.push_back(config.model.path);
  }
  job.model_name = served_names[0];
  finish_lora_options(config.lora, served_names);
  if (progress != "auto" && progress != "bar" && progress != "lines" && progress != "off")
    raise(Err::Usage, "--progress " + progress + " is not bar, lines, off or auto");
  job.progress_bar = progress == "bar" || (progress == "auto" && ::isatty(STDERR_FILENO) != 0);
  if (progress == "off") job.progress_interval_s = INFINITY;
}

}  // namespace

int cmd_batch(const Args& args) {
  EngineConfig config = engine_config_for(Command::Batch);
  BatchJobOptions job;
  std::string max_line;
  std::vector<std::string> served_names;
  std::string progress;
  po::options_description desc = engine_options(config);
  po::options_description b = batch_options(job, max_line, served_names, progress);
  std::string reasoning_parser;
  add_reasoning_parser_option(b, reasoning_parser);
  desc.add(b);
  desc.add(scheduler_options(config));
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "qmpi batch --model DIR --input FILE --output FILE [options]"))
    return 0;
  const bool reasoning = reasoning_parser_on(reasoning_parser);
  finish_batch_options(job, max_line, progress, served_names, config);

  // Before the weights load, on rank 0, which alone reads and writes the job's files.
  if (launcher_rank() == 0) {
    check_batch_files(job);  // the input, the output, and that they are distinct files
    require_model_tokenizer(config.model.files());
    // A chat template that cannot render fails now, not once per line after the weights load.
    const ModelSource& m = config.model;
    if (!m.path.empty())
      chat_template_for(m.path, m.chat_template, jinja::parse_limits(m.chat_template_limits));
  }

  // Every rank: the first SIGTERM/SIGINT lets rank 0 drain while the others keep serving.
  SignalGuard signals("rank " + std::to_string(launcher_rank()));
  config.command_args = "--input " + job.input + " --output " + job.output;
  finish_engine_config(config);
  return run_engine(config, [&](Engine& engine) {
    try {
      const auto tokenizer = load_model_tokenizer(config.model.path);
      engine.executor().set_valid_vocab(tokenizer->vocab_size());
      const auto chat = chat_template_for(config.model.path, config.model.chat_template,
                                          jinja::parse_limits(config.model.chat_template_limits));
      ModelFacts text;
      text.tokenizer = tokenizer.get();
      text.chat = chat.get();
      text.reasoning_parser = reasoning;
      text.served_names = served_names;
      text.adapter_names = lora_names(config.lora);
      const ModelFacts model = ModelFacts::from(engine, text);
      // One scheduler per data-parallel replica (one with --dp 1); an idle replica hears from
      // rank 0 well within --comm-timeout.
      ReplicaScheduler sched(engine.replica_runners(), engine.replica_blocks(),
                             engine.scheduler_config(), config.parallel.comm_timeout_s / 4);
      const BatchSummary done = run_batch_job(job, model, sched, [] { return stop_requested(); });
      sched.log_summary();
      if (done.drained) {
        // As a shell reports a job ended by the signal: 130 for SIGINT, 143 for SIGTERM.
        std::fprintf(stderr,
                     "qmpi: stopped by %s: the finished results are in %s; carry on with the "
                     "same launch line and --resume:\n  qmpi %s\n",
                     strsignal(stop_signal()), job.output.c_str(), resume_command(args).c_str());
        return 128 + stop_signal();
      }
      return replica_loss_exit_code(sched);
    } catch (const Error& e) {
      // Reported here so that run_engine shuts the mesh down cleanly instead of aborting it.
      std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
      return e.exit_code();
    }
  });
}

}  // namespace qmpi
