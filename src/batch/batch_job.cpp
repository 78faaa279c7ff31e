#include "batch/batch_job.h"

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "batch/batch_ids.h"
#include "batch/batch_paths.h"
#include "batch/batch_preflight.h"
#include "batch/h5_results.h"
#include "batch/line_reader.h"
#include "batch/result_file.h"
#include "core/errors.h"
#include "requests/pipeline.h"
#include "requests/request_parser.h"
#include "requests/response_json.h"
#include "requests/served_model.h"

namespace qmpi {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t count_requests(const std::string& path, size_t max_line_bytes) {
  std::ifstream in(path, std::ios::binary);
  int64_t n = 0;
  BoundedLine line;
  while (read_bounded_line(in, max_line_bytes, line)) n += line.blank ? 0 : 1;
  return n;
}

class BatchJob {
 public:
  BatchJob(const BatchJobOptions& opts, const ModelFacts& model, SequenceScheduler& sched)
      : opts_(opts),
        model_(model),
        sched_(sched),
        pipeline_(sched, model, {opts.default_max_tokens, opts.model_name, true}),
        progress_(opts.progress_bar, opts.progress_interval_s) {}

  BatchSummary run(const std::function<bool()>& stop_requested);

 private:
  class LineSink;

  void open_files();
  bool read_line();
  void complete(const LineSink& line, RequestOutput out);
  void fail(const LineSink& line, const Error& e);
  void emit(int64_t index, std::string line);
  void drain();
  ProgressCounts counts() const;
  int64_t output_cap(const Request& req, const std::vector<int32_t>& prompt) const;
  void sync_files();

  const BatchJobOptions& opts_;
  const ModelFacts& model_;
  SequenceScheduler& sched_;
  // Admitted and not finished, for the ETA. Before pipeline_, whose sinks leave it as they go.
  std::unordered_set<const LineSink*> running_;
  RequestPipeline pipeline_;
  Progress progress_;
  std::ifstream input_;
  int64_t line_no_ = 0;
  int64_t next_index_ = 0;
  bool input_done_ = false;
  bool draining_ = false;
  double start_s_ = 0.0;

  std::unordered_set<std::string> done_ids_;  // from an earlier run (--resume)
  BatchIds ids_;                              // one id per line, this input
  std::unique_ptr<ResultFile> file_;
  std::unique_ptr<H5Results> h5_;
  std::optional<OrderedLines> ordered_;
  BatchSummary summary_;
  // Tokens the running requests have generated so far, for the progress lines' output rate:
  // a request's count moves to summary_ when it finishes.
  int64_t running_generated_ = 0;
};

// The most output a request may make, or -1 when it set no limit (chat without max_tokens runs
// up to --max-model-len).
int64_t BatchJob::output_cap(const Request& req, const std::vector<int32_t>& prompt) const {
  const bool capped = req.sampling.max_tokens || opts_.default_max_tokens > 0 ||
                      req.endpoint == Endpoint::Completion;  // OpenAI's default of 16
  if (!capped) return -1;
  return req.choice_count() *
         request_sequence_spec(req, prompt, model_, opts_.default_max_tokens).max_tokens;
}

void BatchJob::open_files() {
  check_distinct_batch_files(opts_);
  if (!std::ifstream(opts_.input))
    raise(Err::InputFile, "cannot read the input file " + opts_.input,
          "Check the --input path and its permissions.");
  bool append = false;
  if (opts_.resume) {
    const ExistingResults existing = resume_results(opts_.output);
    done_ids_ = existing.ids;
    append = true;
    if (existing.lines > 0 || existing.torn_bytes > 0)
      spdlog::info("resume: {} results already in {}{}", existing.lines, opts_.output,
                   existing.torn_bytes > 0
                       ? fmt::format(" (cut a torn last line of {} bytes)", existing.torn_bytes)
                       : std::string());
  } else {
    check_output_reusable(opts_);
  }
  file_ = std::make_unique<ResultFile>(opts_.output, append, opts_.fsync_interval_s);
  if (!opts_.output_h5.empty()) {
    h5_ = std::make_unique<H5Results>(opts_.output_h5, opts_.resume);
    int64_t missing = 0;
    for (const auto& id : done_ids_) missing += h5_->existing_ids().count(id) ? 0 : 1;
    if (missing > 0)
      spdlog::warn(
          "{} results in {} have no rows in {} (an earlier run was killed before "
          "flushing them)",
          missing, opts_.output, opts_.output_h5);
  }
  if (opts_.ordered) ordered_.emplace();
  summary_.counts.total = count_requests(opts_.input, opts_.max_line_bytes);
  input_.open(opts_.input, std::ios::binary);
}

// One request's JSON line: its place in the output, and what the HDF5 rows need to know.
class BatchJob::LineSink final : public RequestSink {
 public:
  LineSink(BatchJob& job, int64_t index, int64_t line_no, std::string custom_id, int32_t n,
           int64_t cap)
      : job(job),
        index(index),
        line_no(line_no),
        custom_id(std::move(custom_id)),
        arrival_s(now_s()),
        first_token_s(size_t(n), -1.0),
        cap(cap) {
    job.running_.insert(this);
  }
  ~LineSink() override { job.running_.erase(this); }
  void delta(int32_t choice, const std::string&, int32_t) override {
    if (first_token_s[size_t(choice)] < 0) first_token_s[size_t(choice)] = now_s();
    ++streamed;
    ++job.running_generated_;
  }
  void final(RequestOutput out) override {
    job.running_.erase(this);
    job.complete(*this, std::move(out));
  }
  void error(const Error& e) override {
    job.running_.erase(this);
    job.fail(*this, e);
  }

  BatchJob& job;
  const int64_t index;  // position among this run's result lines (--ordered)
  const int64_t line_no;
  const std::string custom_id;
  const double arrival_s;
  std::vector<double> first_token_s;  // per choice
  int64_t streamed = 0;               // tokens delta() has seen, all choices
  const int64_t cap;                  // n x max_tokens, -1 without max_tokens (for the ETA)
};

// Reads one input line and acts on it. False at the end of the input.
bool BatchJob::read_line() {
  BoundedLine line;
  if (!read_bounded_line(input_, opts_.max_line_bytes, line)) return false;
  const int64_t line_no = ++line_no_;
  if (line.blank) return true;
  ParsedLine parsed;
  if (line.too_long) {
    parsed.custom_id = line_id(line_no);
    parsed.error =
        Error(Err::BodyTooLarge,
              "line " + std::to_string(line_no) + " is " + std::to_string(line.bytes) +
                  " bytes, over --max-line-bytes " + std::to_string(opts_.max_line_bytes),
              "Split the request, or raise --max-line-bytes.");
  } else {
    parsed = parse_request_line(line.text, line_no);
  }
  std::optional<Error> error = parsed.error;
  const std::string id = ids_.assign(parsed.custom_id, line_no, error);
  if (done_ids_.count(id)) {
    summary_.counts.skipped++;
    return true;
  }
  const int64_t index = next_index_++;
  if (!error) {
    try {
      const Request& req = *parsed.request;
      check_served_model(req.model, model_.served_names);  // as the server's 404
      std::vector<int32_t> prompt = request_prompt_ids(req, model_);
      const int64_t cap = output_cap(req, prompt);
      pipeline_.admit(
          line_no, id, req, std::move(prompt),
          std::make_shared<LineSink>(*this, index, line_no, id, req.choice_count(), cap));
      return true;
    } catch (const Error& e) {
      error = Error(e.code(), "line " + std::to_string(line_no) + ": " + e.message(), e.fix());
    }
  }
  summary_.counts.failed++;
  emit(index, error_line(line_no, id, *error));
  return true;
}

void BatchJob::emit(int64_t index, std::string line) {
  if (!ordered_) return file_->write_line(line);
  for (const auto& l : ordered_->put(index, std::move(line))) file_->write_line(l);
}

void BatchJob::complete(const LineSink& line, RequestOutput out) {
  const double done_s = now_s();
  running_generated_ -= line.streamed;
  for (size_t i = 0; i < out.choices.size(); ++i) {
    const ChoiceOutput& c = out.choices[i];
    summary_.counts.generated_tokens += int64_t(c.tokens.size());
    if (h5_) {
      H5Row row;
      row.line = line.line_no;
      row.custom_id = line.custom_id;
      row.choice = int32_t(i);
      row.prompt_tokens = out.prompt_tokens;
      row.token_ids = c.tokens;
      row.logprobs = c.logprobs;
      row.finish_reason = c.finish_reason;
      row.ttft_s = line.first_token_s[i] - line.arrival_s;
      row.latency_s = done_s - line.arrival_s;
      row.finished_unix = unix_now();
      h5_->append(std::move(row));
    }
  }
  summary_.counts.ok++;
  summary_.counts.prompt_tokens += out.prompt_tokens;
  emit(line.index, success_line(out, *model_.tokenizer, opts_.token_ids));
}

void BatchJob::fail(const LineSink& line, const Error& e) {
  running_generated_ -= line.streamed;
  summary_.counts.failed++;
  emit(line.index,
       error_line(
           line.line_no, line.custom_id,
           Error(e.code(), "line " + std::to_string(line.line_no) + ": " + e.message(), e.fix())));
}

// Stop reading; requests none of whose sequences has started are left for a resumed run.
// With --ordered every request read so far finishes, so the file stays in input order.
void BatchJob::drain() {
  draining_ = true;
  summary_.drained = true;
  if (!ordered_) pipeline_.drop_unstarted();
}

ProgressCounts BatchJob::counts() const {
  ProgressCounts c = summary_.counts;
  c.running_generated_tokens = running_generated_;
  c.running = int64_t(sched_.num_running());
  c.waiting = int64_t(sched_.num_waiting());
  c.kv_blocks_used = sched_.kv_blocks_in_use();
  c.kv_blocks = sched_.kv_blocks_total();
  for (const LineSink* l : running_) c.running_requests.push_back({l->streamed, l->cap});
  return c;
}

void BatchJob::sync_files() {
  if (h5_) h5_->flush();
  file_->sync();
}

BatchSummary BatchJob::run(const std::function<bool()>& stop_requested) {
  open_files();
  start_s_ = now_s();
  const auto lookahead = size_t(2 * sched_.config().max_num_seqs);
  double last_sync = now_s();
  for (;;) {
    if (!draining_ && stop_requested && stop_requested()) {
      spdlog::info("stop requested: finishing the requests in flight");
      drain();
    }
    while (!draining_ && !input_done_ && sched_.num_waiting() < lookahead)
      input_done_ = !read_line();
    if (sched_.idle() && (input_done_ || draining_)) break;
    pipeline_.dispatch(sched_.step());
    progress_.update(counts());
    if (now_s() - last_sync >= opts_.fsync_interval_s) {
      sync_files();
      last_sync = now_s();
    }
  }
  sched_.flush_finished();
  if (ordered_ && ordered_->held() > 0)
    raise(Err::Internal, std::to_string(ordered_->held()) + " ordered results were never written");
  sync_files();
  summary_.counts = counts();
  summary_.stats = sched_.stats();
  std::string extra = fmt::format(
      " | {} preemptions, {} prefix-cached tokens, up to {} micro-batches in flight",
      summary_.stats.preemptions, summary_.stats.cached_tokens, summary_.stats.peak_in_flight);
  if (const SpecDecodeStats& sp = summary_.stats.spec; sp.drafts > 0)
    extra += fmt::format(" | speculation: {} of {} guessed tokens accepted, {:.2f} tokens per step",
                         sp.accepted_tokens, sp.draft_tokens, sp.mean_accepted_length());
  summary_.left_for_resume =
      summary_.counts.total - summary_.counts.skipped - summary_.counts.ok - summary_.counts.failed;
  if (summary_.drained)
    extra +=
        fmt::format(" | stopped early: {} requests left for --resume", summary_.left_for_resume);
  progress_.summary(summary_.counts, summary_.stats.peak_blocks, extra);
  return summary_;
}

}  // namespace

BatchSummary run_batch_job(const BatchJobOptions& opts, const ModelFacts& model,
                           SequenceScheduler& sched, const std::function<bool()>& stop_requested) {
  BatchJob job(opts, model, sched);
  return job.run(stop_requested);
}

}  // namespace qmpi
