#include "io/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/errors.h"

namespace qmpi {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// Nesting deeper than this is no model's metadata: refuse it rather than recurse without end.
constexpr int kMaxArrayDepth = 4;
// More items than any model has (a vocabulary is ~10^5 tokens, a model ~10^4 tensors).
constexpr uint64_t kPlausibleCount = uint64_t(1) << 28;

// Reads the file front to back; every read is bounds-checked, so a truncated or lying file
// raises a catalogue error naming what was being read instead of reading past the map.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void seek(uint64_t pos) { pos_ = pos; }

  void need(uint64_t n, std::string_view what) const {
    if (n > left())
      raise(Err::GgufTruncated, path_ + " ends at byte " + std::to_string(size_) +
                                    " while reading " + std::string(what) + " at byte " +
                                    std::to_string(pos_) + " (" + std::to_string(n) +
                                    " bytes needed)");
  }

  template <class T>
  T get(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string str(std::string_view what) {
    const auto n = get<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  // A count of items each at least `min_bytes` long, refused when the rest of the file could
  // not hold that many (so a damaged count cannot make us allocate gigabytes).
  uint64_t count(std::string_view what, uint64_t min_bytes) {
    const auto n = get<uint64_t>(what);
    if (min_bytes == 0 || n <= left() / min_bytes) return n;
    // A modest count the file is too short for: cut off. A huge one: a damaged count.
    if (n <= kPlausibleCount)
      raise(Err::GgufTruncated, path_ + " ends at byte " + std::to_string(size_) + ", before the " +
                                    std::to_string(n) + " " + std::string(what) +
                                    " counted at byte " + std::to_string(pos_));
    raise(Err::GgufMetadata, path_ + ": the count of " + std::string(what) + " is " +
                                 std::to_string(n) + ", more than the " + std::to_string(left()) +
                                 " bytes left in the file could hold");
  }

  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

// The fewest bytes one value of `kind` takes (a string is at least its length).
uint64_t min_value_bytes(GgufKind kind) {
  switch (kind) {
    case GgufKind::U8:
    case GgufKind::I8:
    case GgufKind::Bool:
      return 1;
    case GgufKind::U16:
    case GgufKind::I16:
      return 2;
    case GgufKind::U32:
    case GgufKind::I32:
    case GgufKind::F32:
      return 4;
    case GgufKind::Array:
      return 12;
    default:
      return 8;
  }
}

bool known_kind(uint32_t k) {
  return k <= uint32_t(GgufKind::F64);
}

// One scalar of `kind` into v.i / v.f / v.s.
void read_scalar(Cursor& c, GgufKind kind, GgufValue& v, const std::string& key) {
  const std::string what = "the value of " + key;
  switch (kind) {
    case GgufKind::U8:
      v.i = c.get<uint8_t>(what);
      break;
    case GgufKind::I8:
      v.i = c.get<int8_t>(what);
      break;
    case GgufKind::U16:
      v.i = c.get<uint16_t>(what);
      break;
    case GgufKind::I16:
      v.i = c.get<int16_t>(what);
      break;
    case GgufKind::U32:
      v.i = c.get<uint32_t>(what);
      break;
    case GgufKind::I32:
      v.i = c.get<int32_t>(what);
      break;
    case GgufKind::I64:
      v.i = c.get<int64_t>(what);
      break;
    case GgufKind::U64: {
      const auto u = c.get<uint64_t>(what);
      if (u > uint64_t(std::numeric_limits<int64_t>::max()))
        raise(Err::GgufMetadata, c.path() + ": " + key + " holds the u64 " + std::to_string(u) +
                                     ", larger than any count or id a model has");
      v.i = int64_t(u);
      break;
    }
    case GgufKind::Bool: {
      const auto b = c.get<uint8_t>(what);
      if (b > 1)
        raise(Err::GgufMetadata,
              c.path() + ": " + key + " is a bool stored as " + std::to_string(b) + ", not 0 or 1");
      v.i = b;
      break;
    }
    case GgufKind::F32:
      v.f = c.get<float>(what);
      break;
    case GgufKind::F64:
      v.f = c.get<double>(what);
      break;
    case GgufKind::String:
      v.s = c.str(what);
      break;
    case GgufKind::Array:
      break;  // read_value handles arrays
  }
}

GgufKind read_kind(Cursor& c, const std::string& key, std::string_view role) {
  const auto k = c.get<uint32_t>("the value type of " + key);
  if (!known_kind(k))
    raise(Err::GgufMetadata, c.path() + ": " + key + " has " + std::string(role) + " type " +
                                 std::to_string(k) + ", which the format does not define (0-12)");
  return GgufKind(k);
}

GgufValue read_value(Cursor& c, GgufKind kind, const std::string& key, int depth) {
  GgufValue v;
  v.kind = kind;
  if (kind != GgufKind::Array) {
    read_scalar(c, kind, v, key);
    return v;
  }
  if (depth >= kMaxArrayDepth)
    raise(Err::GgufMetadata, c.path() + ": " + key + " nests arrays more than " +
                                 std::to_string(kMaxArrayDepth) + " deep");
  v.elem = read_kind(c, key, "an element");
  const uint64_t n = c.count("elements of " + key, min_value_bytes(v.elem));
  for (uint64_t e = 0; e < n; ++e) {
    if (v.elem == GgufKind::Array) {
      v.items.push_back(read_value(c, GgufKind::Array, key, depth + 1));
      continue;
    }
    GgufValue x;
    read_scalar(c, v.elem, x, key);
    if (v.elem == GgufKind::String)
      v.strings.push_back(std::move(x.s));
    else if (v.elem == GgufKind::F32 || v.elem == GgufKind::F64)
      v.floats.push_back(x.f);
    else
      v.ints.push_back(x.i);
  }
  return v;
}

GgufTensor read_tensor_info(Cursor& c, size_t index) {
  GgufTensor t;
  t.name = c.str("the name of tensor " + std::to_string(index));
  const auto dims = c.get<uint32_t>("the dimension count of " + t.name);
  if (dims == 0 || dims > kGgufMaxDims)
    raise(Err::GgufTensorData, c.path() + ": tensor " + t.name + " has " + std::to_string(dims) +
                                   " dimensions; ggml tensors have 1 to " +
                                   std::to_string(kGgufMaxDims));
  uint64_t elems = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    const auto n = c.get<uint64_t>("the shape of " + t.name);
    // 2^40 elements in one dimension is beyond any model; it also keeps products from overflowing.
    if (n == 0 || n > (uint64_t(1) << 40) || elems > (uint64_t(1) << 62) / n)
      raise(Err::GgufTensorData, c.path() + ": tensor " + t.name + " has extent " +
                                     std::to_string(n) + " in dimension " + std::to_string(d) +
                                     ", which no model tensor has");
    elems *= n;
    t.ne.push_back(int64_t(n));
  }
  const auto type = c.get<uint32_t>("the type of " + t.name);
  t.type = ggml_type_info(type);
  if (!t.type)
    raise(Err::GgufTensorType,
          c.path() + ": tensor " + t.name + " has type " + std::to_string(type) +
              ", which the GGUF format does not define",
          "qmpi loads " + std::string(ggml_weight_type_names()) + ".");
  if (!t.type->weights)
    raise(
        Err::GgufTensorType,
        c.path() + ": tensor " + t.name + " is " + std::string(t.type->name) +
            ", a type qmpi does not load",
        "qmpi loads " + std::string(ggml_weight_type_names()) +
            "; use a file of the model in one of those (Q4_K_M, Q5_K_M, Q6_K and Q8_0 files are).");
  if (t.ne[0] % t.type->block_elems != 0)
    raise(Err::GgufTensorData, c.path() + ": tensor " + t.name + " is " +
                                   std::string(t.type->name) + " with rows of " +
                                   std::to_string(t.ne[0]) + " elements, not whole blocks of " +
                                   std::to_string(t.type->block_elems));
  t.nbytes = uint64_t(ggml_bytes(*t.type, int64_t(elems)));
  t.offset = c.get<uint64_t>("the offset of " + t.name);
  return t;
}

// Every tensor's bytes lie in the data section, aligned, and none overlaps the next.
void check_tensor_bytes(std::vector<GgufTensor>& tensors, uint64_t data_offset, uint64_t size,
                        uint32_t alignment, const std::string& path) {
  std::vector<GgufTensor*> by_offset;
  for (GgufTensor& t : tensors) {
    if (t.offset % alignment != 0)
      raise(Err::GgufTensorData, path + ": tensor " + t.name + " starts at data offset " +
                                     std::to_string(t.offset) + ", not a multiple of the " +
                                     std::to_string(alignment) + "-byte alignment");
    // Past the end: most often a cut-off download, whatever else could put it there.
    if (t.offset > size - data_offset)
      raise(Err::GgufTruncated, path + ": tensor " + t.name + " starts at data offset " +
                                    std::to_string(t.offset) + ", past the end of the file (" +
                                    std::to_string(size - data_offset) + " data bytes)");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    GgufTensor& t = *by_offset[i];
    const uint64_t end = t.offset + t.nbytes;
    const std::string desc = "tensor " + t.name + " (" + std::string(t.type->name) + ", " +
                             std::to_string(t.nbytes) + " bytes by its type and shape)";
    if (i + 1 < by_offset.size() && end > by_offset[i + 1]->offset)
      raise(Err::GgufTensorData, path + ": " + desc + " at data offset " +
                                     std::to_string(t.offset) + " runs into tensor " +
                                     by_offset[i + 1]->name + " at " +
                                     std::to_string(by_offset[i + 1]->offset));
    if (end > size - data_offset)
      raise(Err::GgufTruncated, path + ": " + desc + " at data offset " + std::to_string(t.offset) +
                                    " ends past the end of the file (" +
                                    std::to_string(size - data_offset) + " data bytes)");
    t.offset += data_offset;
  }
}

}  // namespace

std::string_view gguf_kind_name(GgufKind k) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  return known_kind(uint32_t(k)) ? kNames[uint32_t(k)] : "unknown";
}

bool GgufValue::is_integer() const {
  switch (kind) {
    case GgufKind::F32:
    case GgufKind::F64:
    case GgufKind::String:
    case GgufKind::Array:
      return false;
    default:
      return true;
  }
}

size_t GgufValue::size() const {
  return ints.size() + floats.size() + strings.size() + items.size();
}

int64_t GgufTensor::rows() const {
  int64_t r = 1;
  for (size_t d = 1; d < ne.size(); ++d) r *= ne[d];
  return r;
}

GgufFile::GgufFile(const std::string& path, Err missing_code) : file_(path, missing_code) {
  Cursor c(file_.data(), file_.size(), file_.path());
  const auto magic = c.get<uint32_t>("the magic bytes");
  if (magic != kMagic) raise(Err::GgufHeader, path + " does not start with the GGUF magic bytes");
  version_ = c.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    raise(Err::GgufHeader, path + " is GGUF version " + std::to_string(version_) +
                               "; qmpi reads versions 2 and 3" +
                               (version_ > 0xffff ? " (a big-endian file?)" : ""));
  // A descriptor is at least a name length, one dimension, a type and an offset; a key/value a
  // key length, a type and one byte.
  const uint64_t n_tensors = c.count("tensors", 8 + 4 + 8 + 4 + 8);
  const uint64_t n_kv = c.count("metadata key/values", 8 + 4 + 1);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.str("metadata key " + std::to_string(i));
    const GgufKind kind = read_kind(c, key, "a value");
    GgufValue v = read_value(c, kind, key, 0);
    if (!metadata_.emplace(key, std::move(v)).second)
      raise(Err::GgufMetadata, path + " holds the key " + key + " twice");
  }
  if (auto a = integer("general.alignment")) {
    if (*a <= 0 || *a > 65536 || (*a & (*a - 1)) != 0)
      raise(Err::GgufMetadata, path + ": general.alignment is " + std::to_string(*a) +
                                   ", not a power of two up to 65536");
    alignment_ = uint32_t(*a);
  }
  std::map<std::string, size_t> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensors_.push_back(read_tensor_info(c, i));
    if (!seen.emplace(tensors_.back().name, i).second)
      raise(Err::GgufTensorData, path + " lists tensor " + tensors_.back().name + " twice");
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty()) c.need(data_offset_ - c.pos(), "the padding before the tensor data");
  check_tensor_bytes(tensors_, std::min(data_offset_, file_.size()), file_.size(), alignment_,
                     path);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_kind(const std::string& path, const std::string& key, const GgufValue& v,
                             std::string_view wanted) {
  raise(Err::GgufMetadata, path + ": " + key + " is a " + std::string(gguf_kind_name(v.kind)) +
                               ", expected " + std::string(wanted));
}
}  // namespace

std::optional<int64_t> GgufFile::integer(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer() || v->kind == GgufKind::Bool) wrong_kind(path(), key, *v, "an integer");
  return v->i;
}

std::optional<double> GgufFile::number(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number() || v->kind == GgufKind::Bool) wrong_kind(path(), key, *v, "a number");
  return v->number();
}

std::optional<std::string> GgufFile::string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->kind != GgufKind::String) wrong_kind(path(), key, *v, "a string");
  return v->s;
}

std::optional<bool> GgufFile::boolean(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->kind != GgufKind::Bool) wrong_kind(path(), key, *v, "a bool");
  return v->i != 0;
}

bool is_gguf_path(std::string_view path) {
  return path.ends_with(".gguf");
}

}  // namespace qmpi
