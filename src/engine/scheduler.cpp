#include "engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "engine/context_limit.h"
#include "engine/executor.h"

namespace qmpi {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::None:
      break;
  }
  return "";
}

StepResult StepRunner::collect() {
  if (done_.empty()) raise(Err::Internal, "collect with no step in flight");
  StepResult r = std::move(done_.front());
  done_.pop_front();
  return r;
}

StepResult ExecutorRunner::run(const StepPlan& plan) {
  return ex_.step(plan);
}
int ExecutorRunner::depth() const {
  return ex_.depth();
}
void ExecutorRunner::submit(const StepPlan& plan) {
  ex_.submit(plan);
}
StepResult ExecutorRunner::collect() {
  return ex_.collect();
}

Scheduler::Scheduler(StepRunner& runner, BlockManager& blocks, const SchedulerConfig& cfg,
                     std::shared_ptr<DraftProposer> drafts)
    : runner_(runner),
      pool_(blocks, cfg.prefix_caching),
      cfg_(cfg),
      drafts_(drafts                          ? std::move(drafts)
              : cfg.speculative.model.empty() ? make_proposer(cfg.speculative)
                                              : cfg.draft_model) {
  if (cfg_.max_num_seqs < 1) raise(Err::Usage, "--max-num-seqs must be at least 1");
  if (cfg_.max_batched_tokens < 1) raise(Err::Usage, "--max-batched-tokens must be at least 1");
}

int64_t Scheduler::add(SequenceSpec spec) {
  const auto prompt = int64_t(spec.prompt.size());
  if (prompt == 0) raise(Err::RequestField, "the prompt is empty");
  if (spec.max_tokens < 1)
    raise(Err::SamplingInvalid,
          "max_tokens is " + std::to_string(spec.max_tokens) + "; it must be at least 1");
  check_context_fits(prompt, spec.max_tokens, cfg_.max_model_len);
  // The last sampled token is never fed back, so the cache holds at most total - 1 tokens.
  const int64_t need = pool_.blocks_for(prompt + spec.max_tokens - 1);
  if (need > pool_.num_blocks())
    raise(Err::PromptTooLong,
          "the prompt has " + std::to_string(prompt) + " tokens and up to " +
              std::to_string(spec.max_tokens) + " more are requested: " + std::to_string(need) +
              " KV blocks, but the whole cache has " + std::to_string(pool_.num_blocks()),
          "Lower max_tokens or raise --kv-blocks.");
  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_;
  next_id_ += id_stride_;
  seq->spec = std::move(spec);
  if (seq->spec.constraint) seq->constraint = seq->spec.constraint->start();
  waiting_.push_back(seq.get());
  const int64_t id = seq->id;
  seqs_.emplace(id, std::move(seq));
  return id;
}

const Sequence* Scheduler::find(int64_t id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::preempt(Sequence& s, std::vector<Scheduled>& planned) {
  planned.erase(std::remove_if(planned.begin(), planned.end(),
                               [&](const Scheduled& p) { return p.seq == &s; }),
                planned.end());
  pool_.release(s.blocks);
  s.hashes.clear();
  s.computed = 0;
  s.fed = false;
  s.state = SeqState::Waiting;
  s.preemptions++;
  running_.erase(std::find(running_.begin(), running_.end(), &s));
  waiting_.push_front(&s);
  stats_.preemptions++;
}

// Makes room for `s` to hold `tokens` positions, preempting the newest running sequences that
// are not in flight (never an older one than `s`). False when `s` cannot run this step: it had
// to go itself, or only sequences in flight could make room (it waits for them).
bool Scheduler::grow(Sequence& s, int64_t tokens, std::vector<Scheduled>& planned) {
  while (!pool_.ensure(s.blocks, tokens)) {
    Sequence* victim = *std::find_if(running_.rbegin(), running_.rend(),
                                     [](Sequence* r) { return !r->in_flight; });
    if (victim == &s) {
      if (&s == running_.back()) preempt(s, planned);  // else younger ones in flight will do
      return false;
    }
    preempt(*victim, planned);
  }
  return true;
}

bool Scheduler::admit(std::vector<Scheduled>& planned, int64_t budget,
                      std::vector<uint64_t>& computing) {
  Sequence& s = *waiting_.front();
  const int64_t bs = pool_.block_size();
  uint64_t first_block = 0;
  if (s.blocks.empty() && pool_.prefix_caching() && s.total() > bs) {
    // A sequence admitted this step or one in flight is computing the same first block (n > 1,
    // a shared system prompt): wait and share its blocks instead of computing them twice.
    const uint64_t root = BlockPool::chain_root(s.spec.adapter);
    first_block = BlockPool::chain_hash(root, s.tokens(0, bs));
    if (computing_.count(first_block)) return false;
    // Keep at least one token to compute: the step that samples needs its logits, and a
    // shared block is never written.
    const int64_t max_blocks = (s.total() - 1) / bs;
    const auto all = s.tokens(0, s.total());
    s.computed = pool_.match_prefix(all, max_blocks, s.blocks, s.hashes, root) * bs;
  }
  const int64_t n = std::min(s.total() - s.computed, budget);
  if (!pool_.ensure(s.blocks, s.computed + n)) {
    pool_.release(s.blocks);
    s.hashes.clear();
    s.computed = 0;
    return false;
  }
  stats_.cached_tokens += s.computed;
  if (first_block != 0 && s.computed == 0) {
    computing_.insert(first_block);
    computing.push_back(first_block);  // for its step to clear when it completes
  }
  waiting_.pop_front();
  s.state = SeqState::Running;
  s.admitted = ++admissions_;
  running_.push_back(&s);
  planned.push_back({&s, n, {}});
  return true;
}

// With one step in flight at a time, every sequence may join it. With a pipeline, the running
// and waiting sequences are spread over depth() steps so that each stage has work.
int64_t Scheduler::depth() const {
  const int64_t runner = runner_.depth();
  return cfg_.micro_batches > 0 ? std::min(cfg_.micro_batches, runner) : runner;
}

int64_t Scheduler::seqs_per_step() const {
  const int64_t depth = this->depth();
  if (depth <= 1) return cfg_.max_num_seqs;
  const int64_t active = std::min(cfg_.max_num_seqs, int64_t(running_.size() + waiting_.size()));
  return std::max<int64_t>(1, (active + depth - 1) / depth);
}

std::vector<Scheduler::Scheduled> Scheduler::schedule(std::vector<uint64_t>& computing) {
  std::vector<Scheduled> planned;
  const int64_t max_seqs = seqs_per_step();
  // Recounted each time: preempting a planned sequence gives its tokens back.
  const auto budget = [&] {
    int64_t b = cfg_.max_batched_tokens;
    for (const auto& p : planned) b -= p.tokens;
    return b;
  };
  const int64_t preempted_before = stats_.preemptions;

  // Decodes first so a long prompt never holds them up, then prompt chunks; each in admission
  // order, so the oldest sequences get blocks first.
  std::vector<Sequence*> order;
  for (Sequence* s : running_)
    if (!s->in_flight && s->total() - s->computed == 1) order.push_back(s);
  for (Sequence* s : running_)
    if (!s->in_flight && s->total() - s->computed != 1) order.push_back(s);
  bool short_of_blocks = false;
  for (Sequence* s : order) {
    if (s->state != SeqState::Running) continue;  // preempted for an older one this step
    const int64_t n = std::min(s->total() - s->computed, budget());
    if (n == 0 || int64_t(planned.size()) >= max_seqs) break;
    if (grow(*s, s->computed + n, planned))
      planned.push_back({s, n, {}});
    else
      short_of_blocks = true;
  }

  // New sequences join only when every running one got its blocks: the cache is not short.
  if (!short_of_blocks && stats_.preemptions == preempted_before)
    while (!waiting_.empty() && int64_t(running_.size()) < cfg_.max_num_seqs && budget() > 0 &&
           int64_t(planned.size()) < max_seqs)
      if (!admit(planned, budget(), computing)) break;
  if (drafts_) add_drafts(planned, budget());
  return planned;
}

// Guesses go to decoding sequences after every sequence got its own tokens, from the budget and
// free blocks left over (no cached block is evicted for them), so they never delay or preempt
// real work and leave the prefix cache as a plain run would.
void Scheduler::add_drafts(std::vector<Scheduled>& planned, int64_t budget) {
  for (Scheduled& p : planned) {
    Sequence& s = *p.seq;
    // A constrained sequence's mask holds for its next token only: it gets no guesses.
    if (p.tokens != 1 || s.total() - s.computed != 1 || s.constraint) continue;
    // The step gives back up to guesses + 1 tokens: never more than max_tokens allows (nor,
    // as add() checked prompt + max_tokens, past max_model_len).
    const int64_t room = std::min(budget - 1, s.spec.max_tokens - int64_t(s.output.size()) - 1);
    if (room < 1) continue;
    std::vector<int32_t> d = drafts_->propose(s, room);
    if (int64_t(d.size()) > room) d.resize(size_t(room));
    const int64_t more = pool_.blocks_for(s.total() + int64_t(d.size())) - int64_t(s.blocks.size());
    if (d.empty() || more > pool_.free_blocks() ||
        !pool_.ensure(s.blocks, s.total() + int64_t(d.size())))
      continue;
    p.tokens += int64_t(d.size());
    budget -= int64_t(d.size());
    p.draft = std::move(d);
  }
}

StepSeq Scheduler::to_step(const Scheduled& sc) const {
  const Sequence& s = *sc.seq;
  StepSeq st;
  st.id = s.id;
  st.start_pos = int32_t(s.computed);
  const auto real = sc.tokens - int64_t(sc.draft.size());
  st.tokens = s.tokens(s.computed, s.computed + real);
  st.tokens.insert(st.tokens.end(), sc.draft.begin(), sc.draft.end());
  st.draft = int32_t(sc.draft.size());
  st.block_table = s.blocks;
  st.first_chunk = !s.fed;
  if (st.first_chunk && s.computed > 0) st.cached_prefix = s.tokens(0, s.computed);
  st.sample = s.computed + real == s.total();
  st.sampling = s.spec.sampling;
  st.sample_index = uint32_t(s.output.size());
  st.adapter = s.spec.adapter;
  if (st.sample && s.constraint) st.allowed = s.constraint->allowed();
  return st;
}

void Scheduler::publish_full_blocks(Sequence& s) {
  if (!pool_.prefix_caching()) return;
  const int64_t bs = pool_.block_size();
  const auto full = size_t(s.computed / bs);
  while (s.hashes.size() < full) {
    const size_t i = s.hashes.size();
    const auto chunk = s.tokens(int64_t(i) * bs, int64_t(i + 1) * bs);
    const uint64_t h = BlockPool::chain_hash(
        i == 0 ? BlockPool::chain_root(s.spec.adapter) : s.hashes[i - 1], chunk);
    pool_.publish(s.blocks[i], h, chunk);
    s.hashes.push_back(h);
  }
}

void Scheduler::retire(Sequence& s) {
  pool_.release(s.blocks);
  const auto it = std::find(running_.begin(), running_.end(), &s);
  if (it != running_.end()) running_.erase(it);
  const auto w = std::find(waiting_.begin(), waiting_.end(), &s);
  if (w != waiting_.end()) waiting_.erase(w);
  finished_.push_back(s.id);
  if (drafts_) drafts_->forget(s.id);
  seqs_.erase(s.id);  // `s` is gone from here on
}

std::vector<TokenEvent> Scheduler::step() {
  if (idle()) return {};
  fill();
  if (in_flight_.empty())
    raise(Err::Internal, "the scheduler found nothing to run with " +
                             std::to_string(running_.size()) + " running and " +
                             std::to_string(waiting_.size()) + " waiting sequences");
  return complete_oldest();
}

void Scheduler::fill() {
  while (!idle() && in_flight_.size() < size_t(depth())) {
    std::vector<uint64_t> computing;
    std::vector<Scheduled> planned = schedule(computing);
    if (planned.empty()) break;  // everything that can run is in flight
    submit(std::move(planned), std::move(computing));
  }
}

void Scheduler::number_ids(int64_t first, int64_t stride) {
  if (!seqs_.empty() || next_id_ != 1)
    raise(Err::Internal, "number_ids after sequences were added");
  next_id_ = first;
  id_stride_ = stride;
}

int64_t Scheduler::load_tokens() const {
  int64_t load = 0;
  for (const auto& [id, s] : seqs_)
    load += (s->total() - s->computed) + (s->spec.max_tokens - int64_t(s->output.size()));
  return load;
}

bool Scheduler::holds_prefix(const std::vector<int32_t>& prompt) const {
  const auto bs = size_t(pool_.block_size());
  if (prompt.size() <= bs) return false;  // no full first block to share
  for (const auto& [id, s] : seqs_)
    if (s->spec.prompt.size() > bs &&
        std::equal(prompt.begin(), prompt.begin() + long(bs), s->spec.prompt.begin()))
      return true;
  return false;
}

void Scheduler::keep_alive() {
  if (!in_flight_.empty())
    raise(Err::Internal,
          "keep_alive with " + std::to_string(in_flight_.size()) + " steps in flight");
  StepPlan plan;
  plan.finished = std::move(finished_);
  finished_.clear();
  runner_.submit(plan);
  runner_.collect();
}

std::vector<int64_t> Scheduler::abandon() {
  std::vector<int64_t> ids;
  for (const auto& [id, seq] : seqs_) {
    if (!seq->cancelled) ids.push_back(id);
    if (drafts_) drafts_->forget(id);
  }
  std::sort(ids.begin(), ids.end());
  runner_.abandon();
  in_flight_.clear();
  computing_.clear();
  finished_.clear();
  waiting_.clear();
  running_.clear();
  seqs_.clear();
  return ids;
}

std::vector<TokenEvent> Scheduler::drain() {
  std::vector<TokenEvent> events;
  while (!in_flight_.empty()) {
    auto more = complete_oldest();
    events.insert(events.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  }
  return events;
}

void Scheduler::submit(std::vector<Scheduled> planned, std::vector<uint64_t> computing) {
  stats_.peak_blocks = std::max(stats_.peak_blocks, pool_.in_use());
  stats_.peak_running = std::max(stats_.peak_running, int64_t(running_.size()));
  InFlightStep f;
  StepPlan plan;
  for (const auto& sc : planned) {
    plan.seqs.push_back(to_step(sc));
    const bool sample = plan.seqs.back().sample;
    f.sample.push_back(sample);
    f.samples += sample ? 1 : 0;
    sc.seq->in_flight = true;
  }
  plan.finished = std::move(finished_);
  finished_.clear();
  f.planned = std::move(planned);
  f.computing = std::move(computing);
  runner_.submit(plan);
  in_flight_.push_back(std::move(f));
  stats_.peak_in_flight = std::max(stats_.peak_in_flight, int64_t(in_flight_.size()));
}

std::vector<TokenEvent> Scheduler::complete_oldest() {
  InFlightStep f = std::move(in_flight_.front());
  in_flight_.pop_front();
  const StepResult r = runner_.collect();
  for (uint64_t key : f.computing) computing_.erase(key);
  // What the result must hold: 1 to guesses + 1 tokens per sampling sequence, each with its
  // logprob and top alternatives.
  bool fits = r.counts.size() == f.samples && r.logprobs.size() == r.tokens.size();
  size_t tokens = 0, tops = 0;
  for (size_t i = 0, k = 0; fits && i < f.planned.size(); ++i) {
    if (!f.sample[i]) continue;
    const int32_t c = r.counts[k++];
    fits = c >= 1 && size_t(c) <= f.planned[i].draft.size() + 1;
    tokens += size_t(c);
    tops += size_t(c) * size_t(std::max(f.planned[i].seq->spec.sampling.top_logprobs, 0));
  }
  if (!fits || r.tokens.size() != tokens || r.top_tokens.size() != tops ||
      r.top_logprobs.size() != tops)
    raise(Err::Internal, "a step returned " + std::to_string(r.tokens.size()) + " tokens in " +
                             std::to_string(r.counts.size()) + " counts for " +
                             std::to_string(f.samples) + " sampling sequences");
  stats_.steps++;

  std::vector<TokenEvent> events;
  size_t k = 0, at = 0, t = 0;  // the next count, token and alternative of the result
  for (size_t i = 0; i < f.planned.size(); ++i) {
    Sequence& s = *f.planned[i].seq;
    const auto drafted = f.planned[i].draft.size();
    s.in_flight = false;
    s.fed = true;
    stats_.computed_tokens += f.planned[i].tokens;
    const size_t count = f.sample[i] ? size_t(r.counts[k++]) : 0;
    const size_t first = at, top_first = t;
    const auto top_k = size_t(std::max(s.spec.sampling.top_logprobs, 0));
    at += count;
    t += count * top_k;
    // The cache keeps the real tokens and the accepted guesses: the tokens after them go back.
    const size_t accepted = count > 0 ? count - 1 : 0;
    s.computed += f.planned[i].tokens - int64_t(drafted - accepted);
    if (drafted > 0) {
      count_drafts(drafted, accepted);
      pool_.shrink(s.blocks, size_t(pool_.blocks_for(s.computed)));
    }
    if (s.cancelled) {
      retire(s);
      continue;
    }
    for (size_t j = 0; j < count; ++j) {
      TokenEvent ev;
      ev.seq = s.id;
      ev.token = r.tokens[first + j];
      ev.logprob = r.logprobs[first + j];
      for (size_t a = top_first + j * top_k; a < top_first + (j + 1) * top_k; ++a)
        ev.top.push_back({r.top_tokens[a], r.top_logprobs[a]});
      s.output.push_back(ev.token);
      if (s.constraint) s.constraint->advance(ev.token);
      stats_.generated++;
      const auto& stops = s.spec.stop_ids;
      if (std::find(stops.begin(), stops.end(), ev.token) != stops.end())
        ev.finish = FinishReason::Stop;
      else if (int64_t(s.output.size()) >= s.spec.max_tokens || s.total() >= cfg_.max_model_len)
        ev.finish = FinishReason::Length;
      events.push_back(std::move(ev));
      if (events.back().finish != FinishReason::None) break;  // the tokens after it are dropped
    }
    // A guess accepted after a stop id is not part of the sequence.
    s.computed = std::min(s.computed, s.total());
    publish_full_blocks(s);
    if (!events.empty() && events.back().seq == s.id && events.back().finish != FinishReason::None)
      retire(s);
  }
  return events;
}

void Scheduler::count_drafts(size_t drafted, size_t accepted) {
  SpecDecodeStats& st = stats_.spec;
  st.drafts++;
  st.draft_tokens += int64_t(drafted);
  st.accepted_tokens += int64_t(accepted);
  auto& per = st.accepted_per_position;
  if (per.size() < drafted) per.resize(drafted);
  for (size_t j = 0; j < accepted; ++j) per[j]++;
}

void Scheduler::finish(int64_t id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (it->second->in_flight)
    it->second->cancelled = true;
  else
    retire(*it->second);
}

void Scheduler::flush_finished() {
  if (finished_.empty()) return;
  if (!in_flight_.empty())
    raise(Err::Internal,
          "flush_finished with " + std::to_string(in_flight_.size()) + " steps in flight");
  StepPlan plan;
  plan.finished = std::move(finished_);
  finished_.clear();
  runner_.submit(plan);
  runner_.collect();
}

}  // namespace qmpi
