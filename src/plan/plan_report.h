// What `qmpi plan` prints: the model and budget summary, the table of layouts (biggest rank of
// each), one layout rank by rank, and the same as JSON for scripts.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "plan/planner.h"

namespace qmpi {

std::string render_plan_text(const ModelConfig& cfg, const PlanResult& plan);
// --tp T --pp P: the verdict, its reason, and every rank.
std::string render_layout_text(const ModelConfig& cfg, const LayoutVerdict& v,
                               const PlanInputs& in);

nlohmann::json plan_json(const ModelConfig& cfg, const PlanResult& plan);
nlohmann::json layout_json(const ModelConfig& cfg, const LayoutVerdict& v, const PlanInputs& in);

}  // namespace qmpi
