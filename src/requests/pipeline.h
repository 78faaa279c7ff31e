// Request -> choices -> sequences -> stop handling -> events, the same for `qmpi run`, `qmpi
// batch` and `qmpi serve`. A request with n choices becomes n sequences in the scheduler (choice
// i samples with choice_seed(seed, i)); each choice's tokens are detokenized and watched for its
// stop strings (stop_strings.h), and a stop string ends its sequence in the scheduler at once.
// What happens goes to the request's sink (events.h).
//
// The pipeline does not step the scheduler: each command has its own loop (one request, an
// input file read ahead, the server's hub and stop polls) and hands every step's tokens to
// dispatch(). Rank 0 only; independent of MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "requests/events.h"
#include "requests/request.h"
#include "requests/sequence_spec.h"
#include "requests/stop_strings.h"

namespace qmpi {

struct PipelineOptions {
  // max_tokens of requests that do not say: 0 = OpenAI's defaults (16 for completions, up to
  // --max-model-len for chat).
  int64_t default_max_tokens = 0;
  std::string model_name;  // "model" of outputs whose request names none
  // A choice lost with its data-parallel replica starts again on another (batch, whose sinks
  // show nothing before the final) instead of failing its request (serve, which streamed it).
  bool requeue_lost = false;
};

class RequestPipeline {
 public:
  // `model` and `sched` must outlive the pipeline. Without a tokenizer (`qmpi run --ids` on a
  // model without tokenizer.json) outputs have no text and stop strings are refused.
  RequestPipeline(SequenceScheduler& sched, const ModelFacts& model, PipelineOptions opts);

  // Admits `req` (its prompt already tokenized) as n sequences under `key`, unique among the
  // requests in the pipeline; the key is also the number in its response ids. `id` is the
  // output's custom_id. A completions request with several prompts (Request::more_prompts) gets
  // n sequences for each. Raises PromptTooLong, SamplingInvalid or RequestField with nothing
  // admitted.
  // Returns the prompt tokens admitted (of every prompt).
  int64_t admit(int64_t key, std::string id, const Request& req, std::vector<int32_t> prompt,
                std::shared_ptr<RequestSink> sink);
  // Hands the tokens of one scheduler step (or drain) to their requests.
  void dispatch(const std::vector<TokenEvent>& events);
  // Ends a request at once: its unfinished choices end as "cancelled" with the text released so
  // far, and it gets its final. Unknown keys (already finished) are ignored.
  void cancel(int64_t key);
  // Forgets, without an event, the requests none of whose sequences has started; returns how
  // many (a drained batch job leaves them for --resume).
  int64_t drop_unstarted();
  // Every request in the pipeline gets `e` as its error.
  void fail_all(const Error& e);

  size_t active() const { return active_.size(); }

 private:
  struct Choice {
    int64_t seq = 0;
    SequenceSpec spec;  // to start it again (requeue_lost)
    ChoiceOutput out;
    std::unique_ptr<StopStringMatcher> text;  // null without a tokenizer
    bool done = false;
  };
  struct Active {
    int64_t key = 0;
    std::string id;
    Endpoint endpoint = Endpoint::Completion;
    std::string model;
    bool logprobs = false;
    int32_t top_logprobs = 0;
    OutputFormat format;
    std::vector<int32_t> prompt;    // with one prompt (several: reported by their token count only)
    int64_t prompt_tokens = 0;      // of every prompt
    std::vector<std::string> stop;  // its stop strings, for a choice started again
    std::vector<Choice> choices;
    size_t remaining = 0;
    std::shared_ptr<RequestSink> sink;
  };

  void on_token(const TokenEvent& ev);
  void on_lost(Active& a, size_t index, const Error& e);
  void finish_choice(Active& a, Choice& c, const std::string& reason);
  void complete(Active& a);
  void fail(Active& a, const Error& e);

  SequenceScheduler& sched_;
  const ModelFacts& model_;
  PipelineOptions opts_;
  std::unordered_map<int64_t, std::unique_ptr<Active>> active_;  // by key
  std::unordered_map<int64_t, std::pair<Active*, size_t>> by_seq_;
};

}  // namespace qmpi
