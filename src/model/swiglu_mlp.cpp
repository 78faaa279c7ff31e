#include "model/swiglu_mlp.h"

namespace qmpi {

MlpWeights load_mlp(WeightLoader& ld, const std::string& prefix, int64_t width, int64_t hidden) {
  MlpWeights w;
  w.gate = ld.load_linear(prefix + ".gate_proj", width, hidden);
  w.up = ld.load_linear(prefix + ".up_proj", width, hidden);
  w.down = ld.load_linear(prefix + ".down_proj", hidden, width);
  return w;
}

void SwiGluMlp::forward(const MlpWeights& w, const GemmInput& x, int64_t n, float* out,
                        std::span<const LoraRows> lora) {
  const int64_t width = w.gate.out_features();
  float* gate = scratch_.get(kGate, size_t(n * width));
  float* up = scratch_.get(kUp, size_t(n * width));
  const ActivationView gate16 = scratch_.rounded(kGateRounded, w.down.input_dtype(be_), n, width);
  const LinearOut gate_up[] = {{&w.gate, gate}, {&w.up, up}};
  forward_group(be_, x, n, gate_up);
  lora_.add(gate_up, x.x, n, lora);
  be_.silu_mul(gate, up, n, width, gate, gate16);
  w.down.forward(be_, {gate, gate16}, n, out);
  const LinearOut down[] = {{&w.down, out}};
  lora_.add(down, gate, n, lora);
}

void SwiGluMlp::forward(const MlpWeights& w, const float* x, int64_t n, float* out, float* gate,
                        float* up, const ActivationView& gate_rounded) const {
  const int64_t width = w.gate.out_features();
  const LinearOut gate_up[] = {{&w.gate, gate}, {&w.up, up}};
  forward_group(be_, x, n, gate_up);
  be_.silu_mul(gate, up, n, width, gate, gate_rounded);
  w.down.forward(be_, {gate, gate_rounded}, n, out);
}

}  // namespace qmpi
