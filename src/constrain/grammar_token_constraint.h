// The engine's TokenConstraint over a compiled constraint: each sequence walks the automaton
// with its sampled tokens; its allowed ids are the state's cached mask plus the stop ids where
// the grammar accepts (so the end comes only there, and the only choice once nothing else can
// follow). With a gate token (Qwen3's </think> under --reasoning-parser) everything is allowed
// until the sequence samples it, and the constraint starts after it.
#pragma once
#include <memory>
#include <vector>

#include "constrain/compiled_constraint.h"
#include "engine/token_constraint.h"

namespace qmpi {

class GrammarTokenConstraint final : public TokenConstraint {
 public:
  GrammarTokenConstraint(std::shared_ptr<CompiledConstraint> compiled,
                         std::vector<int32_t> stop_ids, int32_t gate_token = -1);
  std::unique_ptr<ConstraintState> start() const override;

 private:
  std::shared_ptr<CompiledConstraint> compiled_;
  std::vector<int32_t> stop_ids_;
  int32_t gate_token_;
};

}  // namespace qmpi
