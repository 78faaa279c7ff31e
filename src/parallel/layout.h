// The shape of a run as the parallel layer sees it: TP x PP coordinates, with no knowledge of
// the model. What the mesh must know of the model (which layers a stage runs, which other
// layouts would run it) reaches it as data in a ModelFit, filled by the model layer.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qmpi {

struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

struct Layout {
  int tp = 1;
  int pp = 1;
  std::vector<int> pp_layers;  // optional override: layers per stage, sums to num_layers
  // Data-parallel replicas: dp copies of the tp x pp mesh in one job, replica-major
  // (world_rank = replica * tp * pp + stage * tp + tp_rank). The model rules see one replica.
  int dp = 1;

  int replica_ranks() const { return tp * pp; }
  int world_ranks() const { return dp * tp * pp; }
};

// "--tp 2 --pp 3" (with "--dp 2 " in front when dp > 1), as a user types it.
std::string layout_flags(const Layout& l);

struct ModelFit {
  // Decoder layers of each pipeline stage of a layout that passed check_layout (mapping table).
  std::function<std::vector<Range>(const Layout&)> stage_layers;
  // Raises the model's catalogue error when the layout cannot run it (heads, stages vs layers).
  std::function<void(const Layout&)> check_layout;
  // Layouts of `ranks` ranks that run the model, best first: the fixes errors suggest.
  std::function<std::vector<Layout>(int ranks)> valid_layouts;
};

}  // namespace qmpi
