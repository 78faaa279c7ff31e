#include "model/tensor_dump.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/errors.h"
#include "io/npy.h"

namespace qmpi {

const std::vector<std::string>& TensorDump::names() {
  static const std::vector<std::string> kNames = {
      "attn_norm",     "q",       "k",     "v", "attn", "attn_out", "mlp_norm",
      "router_logits", "mlp_out", "hidden"};
  return kNames;
}

TensorDump::TensorDump(const std::string& spec, std::string dir, int rank)
    : dir_(std::move(dir)), rank_(rank) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto known = [] {
      std::string s;
      for (const auto& n : names()) s += (s.empty() ? "" : ", ") + n;
      return s;
    };
    const size_t dot = item.find('.', 6);
    if (item.rfind("layer.", 0) != 0 || dot == std::string::npos)
      raise(Err::Usage, "QMPI_DUMP entry '" + item + "' is not layer.<i>.<name>",
            "Use e.g. QMPI_DUMP=layer.3.attn_out or layer.*.hidden; names: " + known() + ".");
    const std::string layer = item.substr(6, dot - 6), what = item.substr(dot + 1);
    Entry e{-1, what};
    if (layer != "*") {
      if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos)
        raise(Err::Usage, "QMPI_DUMP entry '" + item + "' names no layer number");
      e.layer = std::stoll(layer);
    }
    if (std::find(names().begin(), names().end(), what) == names().end())
      raise(Err::Usage, "QMPI_DUMP entry '" + item + "' names an unknown tensor '" + what + "'",
            "Known names: " + known() + ".");
    wanted_.push_back(e);
  }
}

void TensorDump::operator()(Backend& be, int64_t layer, const char* what, const float* data,
                            int64_t rows, int64_t cols) const {
  const bool wanted = std::any_of(wanted_.begin(), wanted_.end(), [&](const Entry& e) {
    return (e.layer < 0 || e.layer == layer) && e.what == what;
  });
  if (!wanted) return;
  std::vector<float> host(size_t(rows * cols));
  be.copy_to_host(host.data(), data, host.size() * sizeof(float));
  const std::string file = "layer." + std::to_string(layer) + "." + what + ".rank" +
                           std::to_string(rank_) + ".step" + std::to_string(step_) + ".npy";
  write_npy_f32((std::filesystem::path(dir_) / file).string(), host.data(), rows, cols);
}

}  // namespace qmpi
