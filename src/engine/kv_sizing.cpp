#include "engine/kv_sizing.h"

#include <algorithm>
#include <optional>

#include "core/byte_size.h"
#include "core/errors.h"

namespace qmpi {

int64_t blocks_for_sequences(int64_t max_num_seqs, int64_t max_model_len, int block_size) {
  const int64_t bs = std::max(block_size, 1);
  return max_num_seqs * ((max_model_len + bs - 1) / bs);
}

ProfileShape profile_shape(int64_t max_step_tokens, int64_t max_model_len, int64_t max_num_seqs,
                           int32_t speculative_tokens) {
  ProfileShape s;
  s.tokens = max_step_tokens > 0 ? max_step_tokens : std::max(max_model_len, max_num_seqs);
  s.tokens = std::max<int64_t>(s.tokens, 1);
  s.logit_rows =
      std::clamp<int64_t>(max_num_seqs * (1 + std::max(speculative_tokens, 0)), 1, s.tokens);
  return s;
}

int ranks_on_host(const std::vector<Placement>& placements, int rank) {
  const Placement& me = placements.at(size_t(rank));
  return int(std::count_if(placements.begin(), placements.end(),
                           [&](const Placement& p) { return p.host == me.host; }));
}

int64_t cpu_kv_blocks(uint64_t budget_bytes, uint64_t bytes_per_block, int64_t max_num_seqs,
                      int64_t max_model_len, int block_size) {
  const int64_t one = blocks_for_sequences(1, max_model_len, block_size);
  const int64_t fit = int64_t(budget_bytes / std::max<uint64_t>(bytes_per_block, 1));
  if (fit < one)
    raise(Err::KvCacheDoesNotFit,
          "the CPU KV cache budget of " + format_bytes(budget_bytes) + " holds " +
              std::to_string(fit) + " blocks, but one --max-model-len sequence of " +
              std::to_string(max_model_len) + " tokens needs " + std::to_string(one) + " (" +
              format_bytes(uint64_t(one) * bytes_per_block) + ")",
          "Raise --kv-cache-memory, lower --max-model-len, or use --kv-dtype fp8.");
  return std::min(fit, blocks_for_sequences(max_num_seqs, max_model_len, block_size));
}

int ranks_sharing_device(const std::vector<Placement>& placements, int rank) {
  const Placement& me = placements.at(size_t(rank));
  if (me.device_index < 0) return 1;
  return int(std::count_if(placements.begin(), placements.end(), [&](const Placement& p) {
    return p.host == me.host && p.device_index == me.device_index;
  }));
}

KvBlockChoice choose_kv_blocks(std::span<const int64_t> per_rank) {
  KvBlockChoice c;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r] < 1) {
      if (c.failed_rank < 0) c.failed_rank = int(r);
      continue;
    }
    if (c.limiting_rank < 0 || per_rank[r] < c.blocks) {
      c.blocks = per_rank[r];
      c.limiting_rank = int(r);
    }
  }
  if (c.failed_rank >= 0) c.blocks = 0;
  return c;
}

namespace {

// Between the message and the fix of the error text a failed rank broadcasts.
constexpr char kSeparator = '\0';

bool shared_error(const Error& e) {
  return e.exit_code() == error_entry(Err::Usage).exit_code;
}

}  // namespace

int64_t agree_on_kv_blocks(Comm& world, const std::string& rank_tag,
                           const std::function<int64_t()>& size_this_rank) {
  int64_t mine = 0;
  std::optional<Error> failure;
  try {
    mine = size_this_rank();
    if (mine < 1)
      raise(Err::Internal,
            rank_tag + ": sized its KV cache at " + std::to_string(mine) + " blocks");
  } catch (const Error& e) {
    if (!shared_error(e)) throw;
    failure = e;
    mine = -int64_t(e.code());
  }
  // A failed rank sends minus its error code (codes are positive), the others their count.
  std::vector<int64_t> all(size_t(world.size()));
  world.all_gather(&mine, all.data(), sizeof mine);
  const KvBlockChoice c = choose_kv_blocks(all);
  if (c.failed_rank < 0) return c.blocks;

  // The failing rank's message, so that rank 0 can report it.
  std::string text;
  if (world.rank() == c.failed_rank)
    text = rank_tag + ": " + failure->message() + kSeparator + failure->fix();
  uint64_t n = text.size();
  world.broadcast(&n, sizeof n, c.failed_rank);
  text.resize(n);
  world.broadcast(text.data(), n, c.failed_rank);
  const size_t cut = text.find(kSeparator);
  const Err code = Err(uint16_t(-all[size_t(c.failed_rank)]));
  if (cut == std::string::npos) raise(code, text);
  raise(code, text.substr(0, cut), text.substr(cut + 1));
}

}  // namespace qmpi
