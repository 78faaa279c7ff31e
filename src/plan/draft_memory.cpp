#include "plan/draft_memory.h"

#include "model/config.h"
#include "plan/checkpoint_dtypes.h"

namespace qmpi {

void add_draft_model(PlanInputs& in, const std::string& path) {
  if (path.empty()) return;
  const ModelConfig cfg = ModelConfig::load(path);
  PlanInputs draft;
  draft.tensor_dtypes = read_checkpoint_dtypes(path);
  draft.tensor_blocks = read_checkpoint_blocks(path);
  in.draft_weights = model_weight_bytes(cfg, draft);
  in.draft_kv_per_token = kv_bytes_per_token(cfg, in.kv_dtype);
}

}  // namespace qmpi
