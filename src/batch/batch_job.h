// A batch job on rank 0: reads the input JSONL a little ahead of the scheduler, hands each line
// to the request pipeline (requests/pipeline.h: sequences, stop strings), steps the scheduler,
// and writes one result line per input line as requests finish. Independent of MPI: it runs
// over any Scheduler (the real mesh through ExecutorRunner, or a fake in the tests).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "batch/line_reader.h"
#include "batch/progress.h"
#include "engine/scheduler.h"
#include "model/config.h"
#include "requests/sequence_spec.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace qmpi {

struct BatchJobOptions {
  std::string input;
  std::string output;
  std::string output_h5;   // empty: no HDF5 file
  bool ordered = false;    // write results in input order
  bool resume = false;     // skip ids already in the output, append to it
  bool overwrite = false;  // replace an existing output
  bool token_ids = false;  // add prompt/output token ids to each result
  // max_tokens of requests that do not say: 0 = OpenAI's defaults (16 for completions, up to
  // max-model-len for chat).
  int64_t default_max_tokens = 0;
  std::string model_name;  // "model" in responses when the request has none
  double fsync_interval_s = 2.0;
  double progress_interval_s = 5.0;
  size_t max_line_bytes = kDefaultMaxLineBytes;  // longer lines are error records (QM506)
  bool progress_bar = false;                     // stderr is a terminal
};

struct BatchSummary {
  ProgressCounts counts;
  SchedulerStats stats;
  int64_t left_for_resume = 0;  // requests not done (a drain stopped the job early)
  bool drained = false;
};

// `stop_requested` is polled between steps: once true the job stops reading input, leaves the
// requests that have not started for a resumed run (with `ordered` it finishes every request
// read so far, to keep the order), finishes the others, flushes and returns.
BatchSummary run_batch_job(const BatchJobOptions& opts, const ModelFacts& model,
                           SequenceScheduler& sched, const std::function<bool()>& stop_requested);

}  // namespace qmpi
