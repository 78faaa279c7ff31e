#include "batch/batch_job.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "batch/batch_ids.h"
#include "batch/batch_paths.h"
#include "batch/h5_results.h"
#include "batch/result_file.h"
#include "core/errors.h"
#include "requests/batch_request.h"
#include "requests/batch_response.h"
#include "requests/stop_strings.h"

namespace qmpi {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
}

int64_t count_requests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += blank(line) ? 0 : 1;
  return n;
}

struct Choice {
  int64_t seq = 0;
  ChoiceOutput out;
  std::unique_ptr<StopStringMatcher> text;
  double first_token_s = -1.0;
};

struct Pending {
  int64_t index = 0;  // position among this run's result lines (--ordered)
  int64_t line_no = 0;
  BatchRequest req;
  std::vector<int32_t> prompt;
  std::vector<Choice> choices;
  size_t remaining = 0;
  double arrival_s = 0.0;
};

class BatchJob {
 public:
  BatchJob(const BatchJobOptions& opts, const BatchModel& model, Scheduler& sched)
      : opts_(opts),
        model_(model),
        sched_(sched),
        progress_(opts.progress_bar, opts.progress_interval_s) {}

  BatchSummary run(const std::function<bool()>& stop_requested);

 private:
  void open_files();
  bool read_line();
  void admit(const ParsedLine& parsed, int64_t line_no, int64_t index);
  void on_token(const TokenEvent& ev);
  void finish_choice(Pending& p, Choice& c, const std::string& reason);
  void complete(Pending& p);
  void fail(Pending& p, const Error& e);
  void emit(int64_t index, std::string line);
  void drain();
  ProgressCounts counts() const;
  void sync_files();

  const BatchJobOptions& opts_;
  const BatchModel& model_;
  Scheduler& sched_;
  Progress progress_;
  std::ifstream input_;
  int64_t line_no_ = 0;
  int64_t next_index_ = 0;
  bool input_done_ = false;
  bool draining_ = false;
  double start_s_ = 0.0;

  std::unordered_set<std::string> done_ids_;             // from an earlier run (--resume)
  BatchIds ids_;                                         // one id per line, this input
  std::map<int64_t, std::unique_ptr<Pending>> pending_;  // by index
  std::unordered_map<int64_t, std::pair<Pending*, size_t>> by_seq_;
  std::unique_ptr<ResultFile> file_;
  std::unique_ptr<H5Results> h5_;
  std::optional<OrderedLines> ordered_;
  BatchSummary summary_;
};

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
  } else if (!opts_.overwrite && count_lines(opts_.output) > 0) {
    raise(Err::OutputFile,
          opts_.output + " already holds " + std::to_string(count_lines(opts_.output)) +
              " result lines",
          "Pass --resume to carry on with that job, --overwrite to start over, or choose "
          "another --output.");
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
  summary_.counts.total = count_requests(opts_.input);
  input_.open(opts_.input, std::ios::binary);
}

void BatchJob::admit(const ParsedLine& parsed, int64_t line_no, int64_t index) {
  auto p = std::make_unique<Pending>();
  p->index = index;
  p->line_no = line_no;
  p->req = *parsed.request;
  p->prompt = request_prompt_ids(p->req, model_);
  const RequestSampling& rs = p->req.sampling;
  SequenceSpec spec = request_sequence_spec(p->req, p->prompt, model_, opts_.default_max_tokens);
  const uint64_t seed = spec.sampling.seed;
  p->choices.resize(size_t(rs.n));
  try {
    for (int32_t c = 0; c < rs.n; ++c) {
      spec.sampling.seed = choice_seed(seed, uint32_t(c));
      Choice& ch = p->choices[size_t(c)];
      ch.seq = sched_.add(spec);
      ch.text = std::make_unique<StopStringMatcher>(*model_.tokenizer, rs.stop, true);
      by_seq_[ch.seq] = {p.get(), size_t(c)};
      ++p->remaining;
    }
  } catch (const Error&) {
    for (const Choice& ch : p->choices)
      if (ch.seq != 0) {
        sched_.finish(ch.seq);
        by_seq_.erase(ch.seq);
      }
    throw;
  }
  p->arrival_s = now_s();
  pending_.emplace(index, std::move(p));
}

// Reads one input line and acts on it. False at the end of the input.
bool BatchJob::read_line() {
  std::string line;
  if (!std::getline(input_, line)) return false;
  const int64_t line_no = ++line_no_;
  if (blank(line)) return true;
  const ParsedLine parsed = parse_request_line(line, line_no);
  std::optional<Error> error = parsed.error;
  const std::string id = ids_.assign(parsed.custom_id, line_no, error);
  if (done_ids_.count(id)) {
    summary_.counts.skipped++;
    return true;
  }
  const int64_t index = next_index_++;
  if (!error) {
    try {
      admit(parsed, line_no, index);
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

void BatchJob::on_token(const TokenEvent& ev) {
  const auto it = by_seq_.find(ev.seq);
  if (it == by_seq_.end()) raise(Err::Internal, "a token for an unknown sequence");
  Pending& p = *it->second.first;
  Choice& c = p.choices[it->second.second];
  c.out.tokens.push_back(ev.token);
  c.out.logprobs.push_back(ev.logprob);
  if (p.req.sampling.top_logprobs > 0) c.out.top.push_back(ev.top);
  if (c.first_token_s < 0) c.first_token_s = now_s();
  try {
    // A stop id's own text is left out (eos is special anyway; stop_token_ids may not be).
    if (ev.finish != FinishReason::Stop) c.text->push(ev.token);
  } catch (const Error& e) {  // a token the tokenizer cannot show
    return fail(p, e);
  }
  if (c.text->stopped()) {
    if (ev.finish == FinishReason::None) sched_.finish(ev.seq);
    finish_choice(p, c, "stop");
  } else if (ev.finish != FinishReason::None) {
    finish_choice(p, c, finish_reason_name(ev.finish));
  }
}

void BatchJob::finish_choice(Pending& p, Choice& c, const std::string& reason) {
  c.text->finish();
  c.out.text = c.text->text();
  c.out.finish_reason = reason;
  by_seq_.erase(c.seq);
  if (--p.remaining == 0) complete(p);
}

void BatchJob::complete(Pending& p) {
  RequestOutput out;
  out.line_no = p.line_no;
  out.custom_id = p.req.custom_id;
  out.endpoint = p.req.endpoint;
  out.model = p.req.model.empty() ? opts_.model_name : p.req.model;
  out.prompt_tokens = int64_t(p.prompt.size());
  out.prompt_ids = p.prompt;
  out.logprobs = p.req.sampling.logprobs;
  out.created = int64_t(unix_now());
  const double done_s = now_s();
  for (size_t i = 0; i < p.choices.size(); ++i) {
    Choice& c = p.choices[i];
    summary_.counts.generated_tokens += int64_t(c.out.tokens.size());
    if (h5_) {
      H5Row row;
      row.line = p.line_no;
      row.custom_id = p.req.custom_id;
      row.choice = int32_t(i);
      row.prompt_tokens = out.prompt_tokens;
      row.token_ids = c.out.tokens;
      row.logprobs = c.out.logprobs;
      row.finish_reason = c.out.finish_reason;
      row.ttft_s = c.first_token_s - p.arrival_s;
      row.latency_s = done_s - p.arrival_s;
      row.finished_unix = unix_now();
      h5_->append(std::move(row));
    }
    out.choices.push_back(std::move(c.out));
  }
  summary_.counts.ok++;
  summary_.counts.prompt_tokens += out.prompt_tokens;
  emit(p.index, success_line(out, *model_.tokenizer, opts_.token_ids));
  pending_.erase(p.index);  // `p` is gone from here on
}

void BatchJob::fail(Pending& p, const Error& e) {
  for (const Choice& c : p.choices) {
    sched_.finish(c.seq);  // finished ones are unknown to it by now: a no-op
    by_seq_.erase(c.seq);
  }
  summary_.counts.failed++;
  emit(p.index, error_line(p.line_no, p.req.custom_id,
                           Error(e.code(), "line " + std::to_string(p.line_no) + ": " + e.message(),
                                 e.fix())));
  pending_.erase(p.index);
}

// Stop reading; requests none of whose sequences has started are left for a resumed run.
// With --ordered every request read so far finishes, so the file stays in input order.
void BatchJob::drain() {
  draining_ = true;
  summary_.drained = true;
  if (ordered_) return;
  std::vector<int64_t> idle;
  for (const auto& [index, p] : pending_) {
    const bool untouched = std::all_of(p->choices.begin(), p->choices.end(), [&](const Choice& c) {
      const Sequence* s = sched_.find(c.seq);
      return s && s->state == SeqState::Waiting && s->output.empty();
    });
    if (untouched) idle.push_back(index);
  }
  for (int64_t index : idle) {
    for (const Choice& c : pending_[index]->choices) {
      sched_.finish(c.seq);
      by_seq_.erase(c.seq);
    }
    pending_.erase(index);
  }
}

ProgressCounts BatchJob::counts() const {
  ProgressCounts c = summary_.counts;
  c.running = int64_t(sched_.num_running());
  c.waiting = int64_t(sched_.num_waiting());
  c.kv_blocks_used = sched_.pool().in_use();
  c.kv_blocks = sched_.pool().num_blocks();
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
    for (const TokenEvent& ev : sched_.step()) on_token(ev);
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
  summary_.left_for_resume =
      summary_.counts.total - summary_.counts.skipped - summary_.counts.ok - summary_.counts.failed;
  if (summary_.drained)
    extra +=
        fmt::format(" | stopped early: {} requests left for --resume", summary_.left_for_resume);
  progress_.summary(summary_.counts, summary_.stats.peak_blocks, extra);
  return summary_;
}

}  // namespace

BatchSummary run_batch_job(const BatchJobOptions& opts, const BatchModel& model, Scheduler& sched,
                           const std::function<bool()>& stop_requested) {
  BatchJob job(opts, model, sched);
  return job.run(stop_requested);
}

}  // namespace qmpi
