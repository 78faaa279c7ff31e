#include "io/weight_source.h"

#include <filesystem>

#include "core/errors.h"
#include "io/checkpoint_dir.h"
#include "io/h5_checkpoint.h"

namespace qmpi {
namespace fs = std::filesystem;

int64_t slice_numel(const std::vector<int64_t>& shape, const Slice& slice) {
  const bool whole = slice.length < 0;
  if (shape.empty()) {
    if (!whole || slice.start != 0 || slice.dim != 0)
      raise(Err::Internal, "a slice of a scalar tensor was requested");
    return 1;
  }
  if (slice.dim < 0 || size_t(slice.dim) >= shape.size())
    raise(Err::Internal, "slice along dim " + std::to_string(slice.dim) + " of a " +
                             std::to_string(shape.size()) + "-d tensor");
  const int64_t extent = shape[size_t(slice.dim)];
  if (whole ? slice.start != 0
            : (slice.start < 0 || slice.length > extent || slice.start > extent - slice.length))
    raise(Err::Internal, "slice [" + std::to_string(slice.start) + ", +" +
                             std::to_string(slice.length) + ") of dim " +
                             std::to_string(slice.dim) + " exceeds its extent " +
                             std::to_string(extent));
  int64_t n = whole ? extent : slice.length;
  for (size_t d = 0; d < shape.size(); ++d)
    if (d != size_t(slice.dim)) n *= shape[d];
  return n;
}

std::unique_ptr<WeightSource> open_weight_source(const std::string& model_path,
                                                 bool verify_checksums) {
  const fs::path p(model_path);
  if (is_h5_path(model_path))
    return std::make_unique<H5Weights>(model_path, H5ReadOptions{verify_checksums});
  if (!fs::exists(p)) raise(Err::ModelDirMissing, "model path " + model_path + " does not exist");
  if (!fs::is_directory(p))
    raise(Err::ModelDirMissing, model_path + " is a file, not a model folder",
          "Pass the folder that holds config.json and the safetensors files.");
  return std::make_unique<SafetensorsDir>(model_path);
}

}  // namespace qmpi
