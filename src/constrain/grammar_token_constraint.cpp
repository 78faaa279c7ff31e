#include "constrain/grammar_token_constraint.h"

#include <algorithm>

namespace qmpi {
namespace {

class GrammarState final : public ConstraintState {
 public:
  GrammarState(std::shared_ptr<CompiledConstraint> c, const std::vector<int32_t>& stops,
               int32_t gate)
      : c_(std::move(c)), stops_(stops), gated_(gate >= 0), gate_(gate), at_(c_->start()) {}

  std::vector<uint64_t> allowed() override {
    if (gated_) return {};
    std::vector<uint64_t> bits =
        at_.dead ? std::vector<uint64_t>(c_->vocab().words(), 0) : *c_->mask(at_);
    if (at_.accept || at_.dead)
      for (int32_t id : stops_)
        if (id >= 0 && size_t(id) / 64 < bits.size())
          bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
    return bits;
  }

  void advance(int32_t token) override {
    if (gated_) {
      gated_ = token != gate_;
      return;
    }
    if (std::find(stops_.begin(), stops_.end(), token) != stops_.end()) return;
    c_->advance(at_, token);
  }

 private:
  std::shared_ptr<CompiledConstraint> c_;
  std::vector<int32_t> stops_;
  bool gated_;
  int32_t gate_;
  GrammarPosition at_;
};

}  // namespace

GrammarTokenConstraint::GrammarTokenConstraint(std::shared_ptr<CompiledConstraint> compiled,
                                               std::vector<int32_t> stop_ids, int32_t gate_token)
    : compiled_(std::move(compiled)), stop_ids_(std::move(stop_ids)), gate_token_(gate_token) {}

std::unique_ptr<ConstraintState> GrammarTokenConstraint::start() const {
  return std::make_unique<GrammarState>(compiled_, stop_ids_, gate_token_);
}

}  // namespace qmpi
