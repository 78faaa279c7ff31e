#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "engine/executor.h"
#include "engine/sampler.h"
#include "model/config_bounds.h"
#include "model/gguf_names.h"
#include "model/shard_plan.h"

namespace qmpi {
namespace {

// Draft prefill runs in steps of at most this many tokens, which bounds its activations
// (a long prompt's first proposal would otherwise size the draft's scratch to the prompt).
constexpr int64_t kPrefillChunk = 256;

}  // namespace

DraftModelProposer::DraftModelProposer(const std::string& path, const ModelConfig& target,
                                       Backend& backend, int32_t num_tokens)
    : cfg_(ModelConfig::load(path)),
      target_vocab_(target.vocab_size),
      num_tokens_(num_tokens),
      be_(backend) {
  const std::unique_ptr<WeightSource> source = open_model_weights(path);
  confirm_config_with_weights(cfg_, *source);
  const ShardPlan plan = make_shard_plan(cfg_, Layout{}, 0);
  DecoderWeights weights = load_decoder_weights(cfg_, plan, *source, be_);
  weight_bytes_ = weights.bytes;
  model_ = std::make_unique<DecoderModel>(cfg_, plan, be_, solo_, std::move(weights));
}

KvCacheShape DraftModelProposer::draft_shape(const KvCacheShape& t) const {
  KvCacheShape s = t;
  s.num_layers = int(cfg_.num_layers);
  s.kv_heads = int(cfg_.num_kv_heads);
  s.head_dim = int(cfg_.head_dim);
  return s;
}

uint64_t DraftModelProposer::kv_bytes_per_block(const KvCacheShape& target_shape) const {
  return draft_shape(target_shape).bytes_per_block();
}

void DraftModelProposer::allocate_cache(const KvCacheShape& target_shape, const Executor* target) {
  const KvCacheShape s = draft_shape(target_shape);
  cache_ = std::make_unique<KvCache>(be_, s);
  book_ = std::make_unique<DraftKvBook>(s.num_blocks, s.block_size);
  target_ = target;
}

void DraftModelProposer::forget(int64_t id) {
  if (book_) book_->forget(id);
}

void DraftModelProposer::feed(int64_t id, std::span<const int32_t> tokens, int64_t start,
                              std::vector<float>* logits) {
  const auto T = int32_t(tokens.size());
  const std::vector<int32_t>& table = book_->table(id);
  const int bs = book_->block_size();
  BatchInput b;
  b.tokens.assign(tokens.begin(), tokens.end());
  for (int32_t i = 0; i < T; ++i) {
    const auto pos = int32_t(start + i);
    b.positions.push_back(pos);
    b.slots.push_back(table[size_t(pos / bs)] * bs + pos % bs);
  }
  b.seqs.push_back({0, T, int32_t(start) + T, 0});
  b.block_tables = table;
  if (logits) b.logit_rows.push_back(T - 1);

  const size_t hidden_bytes = size_t(T) * size_t(cfg_.hidden_size) * sizeof(float);
  if (hidden_.bytes() < hidden_bytes) hidden_ = be_.alloc(hidden_bytes);
  model_->embed(b, hidden_.as<float>());
  model_->run_layers(b, hidden_.as<float>(), *cache_);
  book_->fed(id, tokens);
  if (!logits) return;
  logits->resize(size_t(cfg_.vocab_size));
  model_->logits(b, hidden_.as<float>(), logits->data());
}

std::vector<int32_t> DraftModelProposer::propose(const Sequence& s, int64_t max) {
  const int64_t n = std::min<int64_t>(max, num_tokens_);
  if (n < 1 || !book_) return {};
  std::vector<int32_t> history = s.tokens(0, s.total());
  const auto len = int64_t(history.size());
  // The draft feeds the context and all but its last guess; past its own positions it would
  // only extrapolate.
  if (len + n - 1 > cfg_.derived_max_model_len()) {
    book_->forget(s.id);
    return {};
  }
  const int64_t kept = book_->keep_prefix(s.id, history);
  if (!book_->reserve(s.id, len + n - 1)) return {};
  // Never an id the target cannot score, nor one past the tokenizer (padding rows).
  int64_t valid = std::min(cfg_.vocab_size, target_vocab_);
  if (target_ && target_->valid_vocab() > 0) valid = std::min(valid, target_->valid_vocab());
  // Greedy, with the sequence's penalties: a deterministic guess (a point-mass proposal, see
  // the header) and, where the draft agrees with the model, the token a greedy request picks.
  SamplingParams greedy = s.spec.sampling;
  greedy.temperature = 0.0f;
  greedy.top_logprobs = 0;
  std::vector<float> logits;
  std::vector<int32_t> out;
  const auto guess = [&] {
    const int32_t t =
        sample_token(logits, valid, greedy, uint32_t(s.output.size() + out.size()), history).token;
    out.push_back(t);
    history.push_back(t);
  };

  for (int64_t at = kept; at < len; at += kPrefillChunk) {
    const int64_t end = std::min(len, at + kPrefillChunk);
    feed(s.id, std::span<const int32_t>(history).subspan(size_t(at), size_t(end - at)), at,
         end == len ? &logits : nullptr);
  }
  guess();
  while (int64_t(out.size()) < n) {
    feed(s.id, std::span(&out.back(), 1), len + int64_t(out.size()) - 1, &logits);
    guess();
  }
  return out;
}

}  // namespace qmpi
