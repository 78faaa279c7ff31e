#include "model/decoder.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace qmpi {

DecoderModel::DecoderModel(const ModelConfig& cfg, const ShardPlan& plan, Backend& backend,
                           Comm& tp, DecoderWeights weights, TensorDump dump)
    : cfg_(cfg),
      plan_(plan),
      be_(backend),
      tp_(tp),
      w_(std::move(weights)),
      dump_(std::move(dump)),
      scratch_(backend, kSlots),
      attention_(cfg_, plan_, backend),
      mlp_(backend),
      moe_(cfg_, plan_, backend) {}

void DecoderModel::all_reduce(float* x, int64_t count) {
  if (tp_.size() > 1) tp_.all_reduce_sum(x, size_t(count));
}

bool DecoderModel::recordable() const {
  // Dynamic NTK changes the rope kernel's frequency rows (one, or one per token) from step to
  // step, which a recorded graph would replay as captured.
  // LoRA row groups change with the step's mix of adapters, not only with its shape.
  return tp_.size() == 1 && !dump_.enabled() && cfg_.rope_scaling.kind != RopeKind::Dynamic &&
         w_.lora_adapters == 0 &&
         std::none_of(w_.layers.begin(), w_.layers.end(),
                      [](const LayerWeights& L) { return L.moe.has_value(); });
}

void DecoderModel::embed(const BatchInput& batch, float* hidden) {
  const int64_t T = batch.num_tokens();
  w_.embed(be_, batch.tokens.data(), T, plan_.vocab.begin, hidden);
  all_reduce(hidden, T * cfg_.hidden_size);  // each TP rank filled only its vocab rows
}

void DecoderModel::run_layers(const BatchInput& batch, float* x, KvCache& cache) {
  const int64_t T = batch.num_tokens(), h = cfg_.hidden_size;
  const float eps = float(cfg_.rms_norm_eps);
  float* xn = scratch_.get(kNormed, size_t(T * h));
  float* proj = scratch_.get(kProj, size_t(T * h));
  dump_.next_step();

  // Each residual add is fused with the norm that reads its result (Backend::add_rmsnorm): the
  // attention output with the post-attention norm, an MLP output with the next layer's input
  // norm. Only the last layer's MLP output is added alone: the final norm runs on the logit
  // rows, later.
  const size_t layers = w_.layers.size();
  for (size_t l = 0; l < layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    const int64_t layer = plan_.layers.begin + int64_t(l);

    // x += attention(norm(x)), the blocks' partial sums all-reduced over TP. Each norm also
    // writes its output rounded to the dtype the next GEMMs read, where the backend asks.
    const ActivationView attn_in =
        scratch_.rounded(kNormedRounded, L.attn.q.input_dtype(be_), T, h);
    if (l == 0) {
      be_.rmsnorm(x, T, L.input_norm.view(), eps, xn, attn_in);
    } else {
      // the previous layer's MLP
      be_.add_rmsnorm(x, proj, T, L.input_norm.view(), eps, xn, attn_in);
      dump_(be_, layer - 1, "hidden", x, T, h);
    }
    dump_(be_, layer, "attn_norm", xn, T, h);
    attention_.forward(L.attn, batch, {xn, attn_in}, cache.layer(int(l)), proj, dump_, layer);
    all_reduce(proj, T * h);
    dump_(be_, layer, "attn_out", proj, T, h);

    // x += mlp(norm(x)), dense or sparse.
    const Linear& mlp_first = L.moe ? L.moe->router : L.mlp.gate;
    const ActivationView mlp_in =
        scratch_.rounded(kNormedRounded, mlp_first.input_dtype(be_), T, h);
    be_.add_rmsnorm(x, proj, T, L.post_norm.view(), eps, xn, mlp_in);
    dump_(be_, layer, "mlp_norm", xn, T, h);
    if (L.moe)
      moe_.forward(*L.moe, {xn, mlp_in}, T, proj, dump_, layer);
    else
      mlp_.forward(L.mlp, {xn, mlp_in}, T, proj, batch.lora);
    all_reduce(proj, T * h);
    dump_(be_, layer, "mlp_out", proj, T, h);
  }
  if (layers == 0) return;
  be_.add(x, proj, T * h);
  dump_(be_, plan_.layers.begin + int64_t(layers) - 1, "hidden", x, T, h);
}

void DecoderModel::logits(const BatchInput& batch, const float* hidden, float* host_logits) {
  const int64_t R = int64_t(batch.logit_rows.size());
  const int64_t h = cfg_.hidden_size, V = cfg_.vocab_size;
  if (R == 0) return;
  float* rows = scratch_.get(kRows, size_t(R * h));
  be_.gather_rows(hidden, batch.logit_rows.data(), R, h, rows);
  const ActivationView rows16 = scratch_.rounded(kRowsRounded, w_.head_input_dtype(be_), R, h);
  be_.rmsnorm(rows, R, w_.final_norm.view(), float(cfg_.rms_norm_eps), rows, rows16);

  const int64_t local = plan_.vocab.size();
  if (tp_.size() == 1) {
    // A backend in host memory writes the logits where the caller reads them: through a scratch
    // they were a second copy of 9.7 MB a 16-row step (39 MB at 64 rows) and its memcpy.
    float* out = be_.host_memory() ? host_logits : scratch_.get(kLogits, size_t(R * local));
    w_.head_matmul(be_, {rows, rows16}, R, out);
    if (out != host_logits) be_.copy_to_host(host_logits, out, size_t(R * V) * sizeof(float));
    return;
  }
  // Vocab slices may be uneven (the first ranks hold a split unit more): gather equal-sized,
  // padded blocks [tp][R][per_rank] and reassemble [R][V] on the host.
  const int64_t per_rank = plan_.max_vocab_rows(cfg_);
  float* out = scratch_.get(kLogits, size_t(R * per_rank));
  w_.head_matmul(be_, {rows, rows16}, R, out);
  if (local < per_rank) {
    // Pad each row of [R][local] to per_rank floats so every rank sends the same amount.
    std::vector<float> tmp(size_t(R * local));
    be_.copy_to_host(tmp.data(), out, tmp.size() * sizeof(float));
    std::vector<float> padded(size_t(R * per_rank), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(&padded[size_t(r * per_rank)], &tmp[size_t(r * local)], size_t(local) * 4);
    be_.copy_to_device(out, padded.data(), padded.size() * sizeof(float));
  }
  float* gathered = scratch_.get(kGathered, size_t(R * per_rank * tp_.size()));
  tp_.all_gather(out, gathered, size_t(R * per_rank) * sizeof(float));
  std::vector<float> all(size_t(R * per_rank * tp_.size()));
  be_.copy_to_host(all.data(), gathered, all.size() * sizeof(float));
  for (int t = 0; t < tp_.size(); ++t) {
    const Range rows_of_t = plan_.vocab_of(cfg_, t);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(host_logits + r * V + rows_of_t.begin, &all[size_t((t * R + r) * per_rank)],
                  size_t(rows_of_t.size()) * sizeof(float));
  }
}

}  // namespace qmpi
