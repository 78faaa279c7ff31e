// A draft model on rank 0 (engine/draft_model_proposer.h), a small random model on the CPU
// backend, against fresh proposers that prefill everything: its guesses are its own greedy
// continuation (each one the argmax after the ones before), reusing the cache after a rejected
// guess or a fully accepted step gives the guesses a fresh prefill gives, sequences pushed out
// of a small cache come back right, and no guess is an id the target cannot score.
#include "engine/draft_model_proposer.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

#include "../small_model_config.h"
#include "backend/cpu/cpu_backend.h"
#include "model/synthetic_checkpoint.h"

namespace qmpi {
namespace {

constexpr int64_t kVocab = 500;

nlohmann::json small_config(int64_t vocab) {
  return small_model_config(2, vocab);
}

// The draft's folder, written once and removed at exit.
struct DraftDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("qmpi_draft_model_" + std::to_string(::getpid()));
  DraftDir() { write_synthetic_checkpoint(path.string(), small_config(kVocab), 5, DType::F32, 1); }
  ~DraftDir() { std::filesystem::remove_all(path); }
};

std::string draft_dir() {
  static const DraftDir d;
  return d.path.string();
}

Backend& backend() {
  static const std::unique_ptr<Backend> be = make_cpu_backend();
  return *be;
}

std::unique_ptr<DraftModelProposer> proposer(int32_t k, int64_t blocks = 64,
                                             int64_t target_vocab = kVocab) {
  const ModelConfig target = ModelConfig::from_json(small_config(target_vocab), "target");
  auto p = std::make_unique<DraftModelProposer>(draft_dir(), target, backend(), k);
  KvCacheShape shape;
  shape.num_blocks = blocks;
  shape.block_size = 4;
  shape.dtype = DType::F32;
  p->allocate_cache(shape, nullptr);
  return p;
}

Sequence sequence(int64_t id, std::vector<int32_t> prompt, std::vector<int32_t> output = {}) {
  Sequence s;
  s.id = id;
  s.spec.prompt = std::move(prompt);
  s.output = std::move(output);
  return s;
}

std::vector<int32_t> prompt(int32_t seed, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((seed * 131 + i * 37) % kVocab));
  return p;
}

// What a proposer that never saw the sequence guesses.
std::vector<int32_t> fresh(const Sequence& s, int64_t max) {
  return proposer(4)->propose(s, max);
}

TEST(DraftModelProposer, GuessesAreItsGreedyContinuation) {
  auto p = proposer(4);
  const std::vector<int32_t> P = prompt(1, 11);
  const std::vector<int32_t> g = p->propose(sequence(1, P), 10);
  ASSERT_EQ(g.size(), 4u);  // num_speculative_tokens bounds `max`
  for (int32_t t : g) EXPECT_TRUE(t >= 0 && t < kVocab);
  EXPECT_EQ(fresh(sequence(1, P), 1), std::vector<int32_t>{g[0]});
  EXPECT_EQ(fresh(sequence(1, P, {g[0]}), 1), std::vector<int32_t>{g[1]});
  EXPECT_EQ(fresh(sequence(1, P, {g[0], g[1], g[2]}), 1), std::vector<int32_t>{g[3]});
  EXPECT_EQ(p->propose(sequence(2, P), 2), (std::vector<int32_t>{g[0], g[1]}));
  EXPECT_TRUE(p->propose(sequence(3, P), 0).empty());
}

TEST(DraftModelProposer, ReusedCacheGivesWhatAFreshPrefillGives) {
  auto p = proposer(4);
  const std::vector<int32_t> P = prompt(2, 9);
  const std::vector<int32_t> g = p->propose(sequence(1, P), 4);
  // The target kept g[0] and sampled another token than g[1]: g[1..] fall off the draft's cache.
  const int32_t x = (g[1] + 1) % int32_t(kVocab);
  Sequence s = sequence(1, P, {g[0], x});
  const std::vector<int32_t> h = p->propose(s, 4);
  EXPECT_EQ(h, fresh(s, 4));
  // Every guess accepted plus the target's own token.
  s.output.insert(s.output.end(), h.begin(), h.end());
  s.output.push_back(7);
  EXPECT_EQ(p->propose(s, 4), fresh(s, 4));
  // A preempted sequence comes back with the same tokens: nothing changes.
  EXPECT_EQ(p->propose(s, 4), fresh(s, 4));
  // After forget() it starts over, with the same result.
  p->forget(1);
  EXPECT_EQ(p->propose(s, 3), fresh(s, 3));
}

TEST(DraftModelProposer, SequencesPushedOutOfASmallCacheComeBackRight) {
  auto p = proposer(3, /*blocks=*/6);  // 24 positions: one of these sequences at a time
  const Sequence a = sequence(1, prompt(3, 14)), b = sequence(2, prompt(4, 13));
  const std::vector<int32_t> ga = p->propose(a, 3), gb = p->propose(b, 3);
  EXPECT_EQ(ga, fresh(a, 3));
  EXPECT_EQ(gb, fresh(b, 3));
  EXPECT_EQ(p->propose(sequence(1, a.spec.prompt, {ga[0]}), 3),
            fresh(sequence(1, a.spec.prompt, {ga[0]}), 3));
  // Longer than the whole cache: no guesses, and no harm to the others.
  EXPECT_TRUE(p->propose(sequence(3, prompt(5, 30)), 3).empty());
  EXPECT_EQ(p->propose(b, 3), gb);
}

TEST(DraftModelProposer, NeverGuessesAnIdTheTargetCannotScore) {
  // The target's embedding has 40 rows, the draft's 500 (as a padded vocabulary would).
  auto p = proposer(4, 64, /*target_vocab=*/40);
  for (int32_t seed = 0; seed < 6; ++seed)
    for (int32_t t : p->propose(sequence(seed + 1, prompt(seed, 7)), 4)) EXPECT_LT(t, 40);
}

}  // namespace
}  // namespace qmpi
