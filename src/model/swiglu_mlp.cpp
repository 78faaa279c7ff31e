#include "model/swiglu_mlp.h"

namespace qmpi {

MlpWeights load_mlp(WeightLoader& ld, const std::string& prefix, int64_t width, int64_t hidden) {
  MlpWeights w;
  w.gate = ld.load_linear(prefix + ".gate_proj", width, hidden);
  w.up = ld.load_linear(prefix + ".up_proj", width, hidden);
  w.down = ld.load_linear(prefix + ".down_proj", hidden, width);
  return w;
}

void SwiGluMlp::forward(const MlpWeights& w, const float* x, int64_t n, float* out) {
  const int64_t width = w.gate.out_features();
  forward(w, x, n, out, scratch_.get(kGate, size_t(n * width)),
          scratch_.get(kUp, size_t(n * width)));
}

void SwiGluMlp::forward(const MlpWeights& w, const float* x, int64_t n, float* out, float* gate,
                        float* up) const {
  const int64_t width = w.gate.out_features();
  const LinearOut gate_up[] = {{&w.gate, gate}, {&w.up, up}};
  forward_group(be_, x, n, gate_up);
  be_.silu_mul(gate, up, n, width, gate);
  w.down.forward(be_, gate, n, out);
}

}  // namespace qmpi
