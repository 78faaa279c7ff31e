// An int4 projection as a rank holds it, in the one layout the backends multiply
// (Int4WeightView, kernels/kernel_types.h), and the host-side repacking that builds that layout
// from a checkpoint's unpacked values (AWQ and GPTQ files both come through it).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

struct Int4Weight {
  Weight qweight;      // U32 [rows, words]
  Weight scales;       // F16 [rows, groups]
  Weight zeros;        // U8 [rows, groups]
  Weight group_words;  // I32 [1, groups + 1]
  Weight x_index;      // I32 [1, words * 8], or empty (packed input k is x[k])
  int64_t in_features = 0;
  Int4Layout layout = Int4Layout::Rows;  // of qweight, scales and zeros

  Int4WeightView view() const;
  int64_t rows() const { return qweight.rows; }
  uint64_t bytes() const;
  explicit operator bool() const { return static_cast<bool>(qweight); }
};

// One rank's slice of an int4 linear with its values unpacked, before repacking.
struct Int4Unpacked {
  int64_t rows = 0;               // output features n
  int64_t inputs = 0;             // input features k
  int64_t groups = 0;             // scale/zero rows held
  std::vector<uint8_t> q;         // [inputs, rows], 0..15
  std::vector<uint8_t> zero;      // [groups, rows], the true zero point 0..16
  std::vector<uint16_t> scale;    // [groups, rows] F16 bits
  std::vector<int32_t> group_of;  // [inputs]: the held group (0..groups-1) of each input
};

// The packed arrays of an Int4Weight in host memory.
struct Int4Host {
  int64_t rows = 0, words = 0, groups = 0, in_features = 0;
  std::vector<uint32_t> qweight;     // [rows, words]
  std::vector<uint16_t> scales;      // [rows, groups]
  std::vector<uint8_t> zeros;        // [rows, groups]
  std::vector<int32_t> group_words;  // [groups + 1]
  std::vector<int32_t> x_index;      // [words * 8] or empty
};

// Inputs sorted by group (stable) and each group padded to whole words, so every group is one
// run of words; x_index stays empty when that changes nothing (groups already in input order
// and word-aligned: AWQ, GPTQ without act-order).
Int4Host repack_int4(const Int4Unpacked& u);

// Copies `h` into backend memory, in the layout the backend reads.
Int4Weight upload_int4(Backend& be, const Int4Host& h);

}  // namespace qmpi
