// The plan as a picture: for each layout the planner weighed, one bar per rank of its memory
// (weights, KV cache, activations, overhead) against the per-rank budget, so a reader sees at a
// glance why a layout fits or does not. SVG: plain text, opens in any browser, embeds in
// Markdown.
#pragma once
#include <string>

#include "model/config.h"
#include "plan/planner.h"

namespace qmpi {

// Every valid layout of `plan` that uses all its GPUs (the recommended one marked), one
// replica's ranks each; layouts the model rules exclude are listed under the bars with their
// reason. A plan of one layout draws that one.
std::string render_plan_svg(const ModelConfig& cfg, const PlanResult& plan);

}  // namespace qmpi
