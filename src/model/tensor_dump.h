// The debug hook that writes named intermediate tensors to .npy files, so a layer can be
// compared with a reference without editing code: QMPI_DUMP=layer.3.attn_out,layer.*.hidden
// (QMPI_DUMP_DIR says where, default the working folder). Each match is written as
// <dir>/layer.<i>.<what>.rank<r>.step<s>.npy, s counting this rank's forward steps, holding what
// this rank computed (a TP rank's own heads for q/k/v/attn; full rows after an all-reduce).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

class TensorDump {
 public:
  // The intermediates a decoder layer can dump, in the order they are computed.
  static const std::vector<std::string>& names();

  TensorDump() = default;
  // `spec`: comma-separated layer.<i|*>.<name>; empty dumps nothing. Throws Error(Usage) for a
  // malformed entry or an unknown name, listing the known ones.
  TensorDump(const std::string& spec, std::string dir, int rank);

  bool enabled() const { return !wanted_.empty(); }
  // Starts a new forward step (the file names' step number).
  void next_step() { step_ += enabled() ? 1 : 0; }
  // Writes data[rows, cols] (backend memory) when `layer`'s `what` was asked for.
  void operator()(Backend& be, int64_t layer, const char* what, const float* data, int64_t rows,
                  int64_t cols) const;

 private:
  struct Entry {
    int64_t layer;  // -1: every layer
    std::string what;
  };
  std::vector<Entry> wanted_;
  std::string dir_;
  int rank_ = 0;
  int64_t step_ = -1;
};

}  // namespace qmpi
