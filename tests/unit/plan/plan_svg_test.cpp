// `qmpi plan --svg`: one bar per rank of each valid layout, its parts in proportion to the bytes
// the planner counted, the budget line where the budget is.
#include "plan/plan_svg.h"

#include <gtest/gtest.h>

#include <regex>

#include "core/byte_size.h"

namespace qmpi {
namespace {

PlanResult plan_72b(const ModelConfig& cfg, const std::string& mem) {
  PlanInputs in;
  in.gpus = 6;
  in.gpu_mem = parse_byte_size(mem, "--gpu-mem");
  in.max_model_len = 32768;
  in.kv_dtype = DType::BF16;
  in.model_source = "qwen2.5-72b-instruct.json";
  return plan_layouts(cfg, in);
}

struct Drawn {
  std::string cls;
  uint64_t bytes;
  double x, width;
};

std::vector<Drawn> drawn(const std::string& svg) {
  // rects and the budget lines carry their bytes; a line's "width" is its x.
  static const std::regex rect(
      "<rect class=\"(\\w+)\" data-bytes=\"(\\d+)\" x=\"([\\d.]+)\" y=\"[\\d.]+\" "
      "width=\"([\\d.]+)\"");
  static const std::regex line("<line class=\"budget\" data-bytes=\"(\\d+)\" x1=\"([\\d.]+)\"");
  std::vector<Drawn> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), rect), end; it != end; ++it)
    out.push_back({(*it)[1], std::stoull((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), end; it != end; ++it)
    out.push_back({"budget", std::stoull((*it)[1]), 0, std::stod((*it)[2]) - 170});
  return out;
}

TEST(PlanSvg, BarsAreTheBytesThePlannerCounted) {
  const ModelConfig cfg = ModelConfig::load(std::string(QMPI_SOURCE_DIR) +
                                            "/tests/fixtures/configs/qwen2.5-72b-instruct.json");
  const PlanResult plan = plan_72b(cfg, "80GB");
  ASSERT_GE(plan.best, 0);
  const std::string svg = render_plan_svg(cfg, plan);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);

  size_t bars = 0, layouts = 0, excluded = 0;
  for (const LayoutVerdict& v : plan.layouts) {
    if (v.gpus() != 6) {
      EXPECT_EQ(svg.find("data-layout=\"" + layout_flags(v.layout) + "\""), std::string::npos);
      continue;
    }
    if (!v.valid) {
      ++excluded;
      EXPECT_NE(svg.find(layout_flags(v.layout) + ": "), std::string::npos);
      continue;
    }
    ++layouts;
    bars += size_t(v.layout.replica_ranks());
    EXPECT_NE(svg.find("data-layout=\"" + layout_flags(v.layout) + "\""), std::string::npos);
  }
  ASSERT_GT(layouts, 3u);  // --tp 6, --tp 2 --pp 3, --dp 2 --tp 3, ...
  const std::string best =
      layout_flags(plan.layouts[size_t(plan.best)].layout) + "  fits  (recommended)";
  EXPECT_NE(svg.find(best), std::string::npos) << best;
  size_t groups = 0;
  for (size_t p = svg.find("<g class=\"rank\""); p != std::string::npos;
       p = svg.find("<g class=\"rank\"", p + 1))
    ++groups;
  EXPECT_EQ(groups, bars);

  // One pixel scale for every part and budget line.
  const std::vector<Drawn> d = drawn(svg);
  ASSERT_FALSE(d.empty());
  const double px = d.front().width / double(d.front().bytes);
  size_t weights = 0, budgets = 0;
  for (const Drawn& x : d) {
    EXPECT_NEAR(x.width, double(x.bytes) * px, 0.02) << x.cls;
    weights += x.cls == "weights";
    budgets += x.cls == "budget";
  }
  EXPECT_EQ(weights, bars);
  EXPECT_EQ(budgets, layouts);
}

}  // namespace
}  // namespace qmpi
