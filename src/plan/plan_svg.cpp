#include "plan/plan_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/byte_size.h"

namespace qmpi {
namespace {

constexpr double kLeft = 170, kBarWidth = 560, kBarHeight = 14, kRowGap = 3, kGroupGap = 26;
constexpr double kTop = 58;

struct Part {
  const char* name;
  const char* colour;
  uint64_t RankMemory::*bytes;
};
constexpr std::array kParts{
    Part{"weights", "#4e79a7", &RankMemory::weights},
    Part{"KV cache", "#59a14f", &RankMemory::kv_cache},
    Part{"activations", "#f28e2b", &RankMemory::activations},
    Part{"overhead", "#9c9c9c", &RankMemory::overhead},
};

std::string escaped(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '&')
      out += "&amp;";
    else if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

std::string text(double x, double y, const std::string& s, const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>\n", x, y, extra, escaped(s));
}

}  // namespace

std::string render_plan_svg(const ModelConfig& cfg, const PlanResult& plan) {
  // One scale for every bar: the largest rank total or budget among the layouts drawn.
  uint64_t scale = 1;
  double height = kTop;
  std::vector<const LayoutVerdict*> drawn, excluded;
  for (const LayoutVerdict& v : plan.layouts) {
    // The layouts that use every GPU (the plan's table also weighs smaller ones).
    if (v.gpus() != plan.inputs.gpus && plan.layouts.size() > 1) continue;
    (v.valid ? drawn : excluded).push_back(&v);
    if (!v.valid) continue;
    scale = std::max(scale, v.budget);
    const size_t ranks = size_t(v.layout.replica_ranks());
    for (size_t r = 0; r < ranks && r < v.ranks.size(); ++r)
      scale = std::max(scale, v.ranks[r].total());
    height += 18 + double(ranks) * (kBarHeight + kRowGap) + kGroupGap;
  }
  height += 20 + 16 * double(excluded.size());
  const double px = kBarWidth / double(scale);

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kLeft + kBarWidth + 140, height);
  const PlanInputs& in = plan.inputs;
  svg += text(10, 20,
              fmt::format("{} on {} {}: memory per rank", cfg.architecture, in.gpus,
                          in.backend == BackendKind::Cuda ? "GPUs" : "CPU ranks"),
              " font-size=\"15\" font-weight=\"bold\"");
  double lx = 10;
  for (const Part& p : kParts) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"32\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", lx,
                       p.colour);
    svg += text(lx + 16, 42, p.name);
    lx += 30 + 7.0 * double(std::string_view(p.name).size());
  }
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"31\" x2=\"{0:.1f}\" y2=\"45\" stroke=\"#d62728\" "
      "stroke-width=\"2\"/>\n",
      lx + 2);
  svg += text(lx + 8, 42, "budget per rank");

  double y = kTop;
  for (const LayoutVerdict* v : drawn) {
    const bool best = plan.best >= 0 && &plan.layouts[size_t(plan.best)] == v;
    std::string title = layout_flags(v->layout);
    title += v->fits ? "  fits" : "  does not fit";
    if (best) title += "  (recommended)";
    svg += text(
        10, y + 12, title,
        best ? " font-weight=\"bold\" fill=\"#1a7f37\"" : (v->fits ? "" : " fill=\"#b42318\""));
    y += 18;
    const size_t ranks = std::min(size_t(v->layout.replica_ranks()), v->ranks.size());
    const double group_top = y;
    for (size_t r = 0; r < ranks; ++r) {
      const RankMemory& m = v->ranks[r];
      svg += fmt::format("<g class=\"rank\" data-layout=\"{}\" data-rank=\"{}\">\n",
                         escaped(layout_flags(v->layout)), m.rank);
      svg += text(28, y + kBarHeight - 3,
                  fmt::format("rank {} (stage {}, tp {})", m.rank, m.stage, m.tp_rank));
      double x = kLeft;
      for (const Part& p : kParts) {
        const uint64_t b = m.*p.bytes;
        if (b == 0) continue;
        svg += fmt::format(
            "<rect class=\"{}\" data-bytes=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" "
            "height=\"{:.0f}\" fill=\"{}\"><title>{}: {}</title></rect>\n",
            p.name[0] == 'K' ? "kv" : p.name, b, x, y, double(b) * px, kBarHeight, p.colour, p.name,
            format_bytes(b));
        x += double(b) * px;
      }
      svg += text(x + 6, y + kBarHeight - 3, format_bytes(m.total()), " fill=\"#444\"");
      svg += "</g>\n";
      y += kBarHeight + kRowGap;
    }
    const double bx = kLeft + double(v->budget) * px;
    svg += fmt::format(
        "<line class=\"budget\" data-bytes=\"{}\" x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" "
        "y2=\"{:.1f}\" stroke=\"#d62728\" stroke-width=\"2\"/>\n",
        v->budget, bx, group_top - 2, bx, y);
    y += kGroupGap;
  }
  if (!excluded.empty())
    svg += text(10, y + 4, "Layouts the model rules out:", " font-weight=\"bold\"");
  for (const LayoutVerdict* v : excluded) {
    y += 16;
    svg += text(20, y + 4, layout_flags(v->layout) + ": " + v->reason, " fill=\"#666\"");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace qmpi
