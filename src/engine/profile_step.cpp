#include "engine/profile_step.h"

#include <vector>

namespace qmpi {

BatchInput profile_batch(const ProfileShape& shape, int block_size) {
  const int32_t T = int32_t(shape.tokens);
  BatchInput b;
  b.tokens.assign(size_t(T), 0);
  b.positions.resize(size_t(T));
  b.slots.resize(size_t(T));
  for (int32_t i = 0; i < T; ++i) {
    b.positions[size_t(i)] = i;
    b.slots[size_t(i)] = i % block_size;
  }
  AttentionSeq s;
  s.q_begin = 0;
  s.q_len = T;
  s.ctx_len = T;
  s.table_begin = 0;
  b.seqs.push_back(s);
  b.block_tables.assign(size_t((T + block_size - 1) / block_size), 0);
  for (int64_t r = shape.tokens - shape.logit_rows; r < shape.tokens; ++r)
    b.logit_rows.push_back(int32_t(r));
  return b;
}

uint64_t run_profile_step(DecoderModel& model, Backend& backend, KvCacheShape kv,
                          const ProfileShape& shape) {
  kv.num_blocks = 1;
  KvCache cache(backend, kv);
  const BatchInput batch = profile_batch(shape, kv.block_size);
  const size_t hidden_floats = size_t(shape.tokens * model.hidden_size());
  Buffer hidden = backend.alloc(hidden_floats * sizeof(float));
  const ShardPlan& plan = model.plan();
  if (plan.first_stage)
    model.embed(batch, hidden.as<float>());
  else
    backend.fill_zero(hidden.data(), hidden.bytes());
  model.run_layers(batch, hidden.as<float>(), cache);
  if (plan.last_stage) {
    std::vector<float> logits(size_t(shape.logit_rows * model.vocab_size()));
    model.logits(batch, hidden.as<float>(), logits.data());
  }
  backend.synchronize();
  return kv.bytes();
}

}  // namespace qmpi
