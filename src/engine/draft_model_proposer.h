// Speculative decoding with a draft model ("model" in --speculative-config): a small model of
// the target's tokenizer (a Qwen2.5-0.5B for a Qwen2.5-72B) guesses each decoding sequence's
// next tokens greedily, and the target checks them in one pass as it checks prompt lookup's.
//
// Where it runs: on rank 0, whole (unsharded), on rank 0's backend. Guesses are made where steps
// are planned (the scheduler on rank 0), so the draft needs no message to or from another rank
// and adds none to a step; a small draft's weights and cache cost rank 0 little next to its
// share of the target. The pre-flight and `qmpi plan` count them on rank 0 (plan/draft_memory.h).
//
// Exactness: the draft is deterministic (the argmax after the request's penalties, as a greedy
// request picks), a point-mass proposal. The verifier samples each position as a plain step
// would and keeps a guess while it equals the sample, which for a point mass is the modified
// rejection sampling of Leviathan et al. (accept x with probability p(x), else a sample from p
// without x): the output keeps the target's distribution at any temperature (last_stage.cpp),
// and greedy output is the plain run's token for token. A sampled (non-greedy) draft would need
// the full rule min(1, p/q) and a residual distribution, which the verifier does not have.
//
// State: per sequence, the tokens in the draft's KV cache; each proposal keeps their common
// prefix with the sequence's prompt and output, prefills the rest and decodes `max` guesses
// (draft_kv_book.h). The cache has as many blocks as the target's (one replica's), so it can
// hold every running sequence's context; with --dp the replicas' sequences share it, and a
// sequence pushed out prefills again.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/draft_kv_book.h"
#include "engine/draft_proposer.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "parallel/solo_comm.h"

namespace qmpi {

class Executor;

class DraftModelProposer final : public DraftProposer {
 public:
  // Loads the draft at `path` (a folder, .h5 or .gguf, as --model) whole into `backend`.
  // `target` is the target model's config: the draft may only guess ids it can score. Its
  // tokenizer was compared with the target's before (requests/draft_tokenizer.h).
  DraftModelProposer(const std::string& path, const ModelConfig& target, Backend& backend,
                     int32_t num_tokens);

  // The draft's K and V bytes per cache block of `shape`'s size and dtype (the target's).
  uint64_t kv_bytes_per_block(const KvCacheShape& target_shape) const;
  // Allocates the draft's cache with the target's block count and shape. Before propose();
  // `target`, when given, supplies the tokenizer's size (Executor::valid_vocab) at each proposal.
  void allocate_cache(const KvCacheShape& target_shape, const Executor* target);
  uint64_t weight_bytes() const { return weight_bytes_; }

  std::vector<int32_t> propose(const Sequence& s, int64_t max) override;
  void forget(int64_t id) override;

 private:
  // Writes `tokens` of sequence `id`, from position `start`, into the draft's cache (its blocks
  // reserved); with `logits`, the last one's logits into it.
  void feed(int64_t id, std::span<const int32_t> tokens, int64_t start, std::vector<float>* logits);
  KvCacheShape draft_shape(const KvCacheShape& target_shape) const;

  ModelConfig cfg_;
  int64_t target_vocab_;
  int32_t num_tokens_;
  Backend& be_;
  SoloComm solo_;
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<DraftKvBook> book_;
  const Executor* target_ = nullptr;
  Buffer hidden_;
};

}  // namespace qmpi
