// One GGUF file (llama.cpp's model format, versions 2 and 3), memory-mapped and fully validated
// on open: the header, every metadata key/value, every tensor descriptor, and each tensor's
// bytes (type x shape) against the data section, before any weight is used.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 key/value count; the key/values (a string
// key, a u32 value type, the value); the tensor descriptors (name, u32 dims, u64 extent per dim
// innermost first, u32 ggml type, u64 offset into the data section); padding to
// general.alignment (default 32); the data section.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"
#include "io/mapped_file.h"

namespace qmpi {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;  // ggml tensors have at most four dimensions

// The value types of GGUF metadata, numbered as the file stores them.
enum class GgufKind : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u32", "string", "array"...
std::string_view gguf_kind_name(GgufKind k);

// One metadata value. Integers (and bools) are held in `i`, floats in `f`; arrays hold their
// elements in `ints`, `floats` or `strings` by element kind, nested arrays in `items`.
struct GgufValue {
  GgufKind kind = GgufKind::U8;
  GgufKind elem = GgufKind::U8;  // arrays: the element kind
  int64_t i = 0;                 // every integer kind fits: u64 values above 2^63 are refused
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufValue> items;

  bool is_integer() const;  // an integer kind or bool
  bool is_number() const { return is_integer() || kind == GgufKind::F32 || kind == GgufKind::F64; }
  double number() const { return is_integer() ? double(i) : f; }
  size_t size() const;  // arrays: element count
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // extents, innermost (contiguous) first, as the file lists them
  const GgmlTypeInfo* type = nullptr;
  uint64_t offset = 0;  // absolute, in the file
  uint64_t nbytes = 0;  // type x shape

  int64_t row_elems() const { return ne[0]; }
  int64_t rows() const;  // the product of the outer extents
  uint64_t row_bytes() const { return uint64_t(ggml_bytes(*type, ne[0])); }
};

class GgufFile {
 public:
  // Throws GgufHeader (magic, version), GgufTruncated, GgufMetadata (bad value types, absurd
  // counts, a duplicate key), GgufTensorType (unknown or unsupported type) and GgufTensorData
  // (rows not whole blocks, misaligned or overlapping or out-of-file bytes), naming the file
  // and the key or tensor. `missing_code` is raised when the file cannot be opened.
  explicit GgufFile(const std::string& path, Err missing_code = Err::ModelDirMissing);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_.size(); }
  const uint8_t* bytes() const { return file_.data(); }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  // The tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // Typed look-ups of metadata: nullopt when absent; Error(GgufMetadata) naming the key and the
  // file when present with another kind.
  std::optional<int64_t> integer(const std::string& key) const;
  std::optional<double> number(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  std::optional<bool> boolean(const std::string& key) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
};

// True for a path ending in .gguf.
bool is_gguf_path(std::string_view path);

}  // namespace qmpi
