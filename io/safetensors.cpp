#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

namespace qmpi {
namespace {

using nlohmann::json;

struct RawTensor {
  TensorInfo info;
  uint64_t begin = 0, end = 0;  // relative to the data buffer
};

[[noreturn]] void bad_header(const std::string& path, const std::string& what) {
  raise(Err::SafetensorsHeader, path + ": " + what);
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// nlohmann keeps the last of duplicate keys silently; the format forbids them, so we look at
// every top-level key while parsing.
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, end, cb);
  } catch (const json::exception& e) {
    bad_header(path, std::string("the JSON header does not parse (") + e.what() + ")");
  }
  if (!duplicate.empty())
    bad_header(path, "the JSON header names tensor '" + duplicate + "' twice");
  if (!header.is_object()) bad_header(path, "the JSON header is not an object");
  return header;
}

uint64_t get_u64(const std::string& path, const std::string& name, const json& v,
                 const char* field) {
  if (!v.is_number_unsigned())
    bad_header(path, "tensor '" + name + "' has a " + field +
                         " entry that is not a non-negative "
                         "integer: " +
                         v.dump());
  return v.get<uint64_t>();
}

RawTensor parse_entry(const std::string& path, const std::string& name, const json& e) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    bad_header(path, "tensor '" + name + "' needs dtype, shape and data_offsets: " + e.dump());
  const json& dt = e["dtype"];
  if (!dt.is_string()) bad_header(path, "tensor '" + name + "' has a non-string dtype");
  auto dtype = parse_dtype(dt.get_ref<const std::string&>());
  if (!dtype)
    bad_header(
        path, "tensor '" + name + "' has unknown dtype '" + dt.get_ref<const std::string&>() + "'");
  RawTensor t;
  t.info.name = name;
  t.info.dtype = *dtype;
  t.info.file = path;
  const json& shape = e["shape"];
  if (!shape.is_array()) bad_header(path, "tensor '" + name + "' has a shape that is not a list");
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : shape) {
    uint64_t n = get_u64(path, name, d, "shape");
    if (n > uint64_t(INT64_MAX)) overflow = true;
    t.info.shape.push_back(int64_t(n));
    overflow |= __builtin_mul_overflow(numel, n, &numel);
  }
  overflow |= __builtin_mul_overflow(numel, uint64_t(dtype_size(*dtype)), &t.info.nbytes);
  if (overflow) bad_header(path, "tensor '" + name + "' has a shape too large to address");
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    bad_header(path, "tensor '" + name + "' needs data_offsets [begin, end], got " + off.dump());
  t.begin = get_u64(path, name, off[0], "data_offsets");
  t.end = get_u64(path, name, off[1], "data_offsets");
  if (t.end < t.begin)
    raise(Err::SafetensorsOffsets, path + ": tensor '" + name + "' has data_offsets [" +
                                       std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                       "] that end before they begin");
  if (t.end - t.begin != t.info.nbytes)
    raise(Err::SafetensorsOffsets,
          path + ": tensor '" + name + "' spans " + std::to_string(t.end - t.begin) +
              " bytes but shape " + shape_string(t.info.shape) + " x " +
              std::string(dtype_name(t.info.dtype)) + " needs " + std::to_string(t.info.nbytes));
  return t;
}

// The byte ranges must tile [0, buffer) exactly: a gap, an overlap or bytes after the last
// tensor all mean the file is not what its writer produced.
void check_tiling(const std::string& path, std::vector<RawTensor>& ts, uint64_t header_end,
                  uint64_t file_size) {
  std::stable_sort(ts.begin(), ts.end(), [](const RawTensor& a, const RawTensor& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  const uint64_t buffer = file_size - header_end;
  uint64_t cursor = 0;
  const RawTensor* prev = nullptr;
  for (const auto& t : ts) {
    const std::string range = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
    if (t.begin < cursor)
      raise(Err::SafetensorsOffsets, path + ": tensor '" + t.info.name + "' bytes " + range +
                                         " overlap tensor '" + prev->info.name + "' (ends at " +
                                         std::to_string(cursor) + ")");
    if (t.begin > cursor) {
      if (t.begin >= buffer)
        raise(Err::SafetensorsOffsets, path + ": tensor '" + t.info.name + "' bytes " + range +
                                           " start past the end of the data buffer (" +
                                           std::to_string(buffer) + " bytes)");
      // The header names no tensor for these bytes: most often an entry was removed from it,
      // so the neighbours are named to find which (e.g. a .qzeros beside its .qweight).
      raise(Err::SafetensorsOffsets,
            path + ": " + std::to_string(t.begin - cursor) + " unused bytes " +
                (prev ? "between tensor '" + prev->info.name + "' and tensor '"
                      : std::string("before tensor '")) +
                t.info.name + "' at " + std::to_string(t.begin) +
                "; tensors must fill the data buffer without gaps, so the header lacks a "
                "tensor's entry there or the file is damaged");
    }
    cursor = t.end;
    prev = &t;
  }
  if (cursor > buffer)
    raise(Err::ShardTruncated, path + " is " + std::to_string(file_size) +
                                   " bytes but its header describes " +
                                   std::to_string(header_end + cursor) + " bytes (" +
                                   std::to_string(header_end + cursor - file_size) + " missing)");
  if (cursor < buffer)
    raise(Err::SafetensorsOffsets,
          path + ": " + std::to_string(buffer - cursor) +
              " bytes follow the last tensor; a safetensors file ends with its last tensor, so "
              "the file is damaged or was appended to");
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path, Err missing_code)
    : file_(path, missing_code) {
  const uint64_t size = file_.size();
  if (size < 8)
    bad_header(path, "the file is " + std::to_string(size) +
                         " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(file_.data());
  if (n > kMaxSafetensorsHeader)
    bad_header(path, "header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kMaxSafetensorsHeader) + " bytes");
  if (n > size - 8)
    bad_header(path, "header length " + std::to_string(n) + " runs past the end of the " +
                         std::to_string(size) + "-byte file");
  const char* text = reinterpret_cast<const char*>(file_.data() + 8);
  json header = parse_header(path, text, text + n);

  std::vector<RawTensor> raw;
  for (auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad_header(path, "__metadata__ is not an object");
      for (auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad_header(path, "__metadata__ value of '" + mk + "' is not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    raw.push_back(parse_entry(path, key, value));
  }
  check_tiling(path, raw, 8 + n, size);

  tensors_.reserve(raw.size());
  for (auto& t : raw) {
    index_.emplace(t.info.name, tensors_.size());
    offsets_.push_back(8 + n + t.begin);
    tensors_.push_back(std::move(t.info));
  }
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* SafetensorsFile::data(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) raise(Err::TensorMissing, path() + " has no tensor '" + name + "'");
  return file_.data() + offsets_[it->second];
}

void require_float_weight(const TensorInfo& info) {
  if (!is_float_weight(info.dtype))
    raise(Err::DTypeUnsupported, "tensor '" + info.name + "' in " + info.file + " is " +
                                     std::string(dtype_name(info.dtype)) +
                                     "; qmpi computes with F32, F16 or BF16 "
                                     "weights only (quantized checkpoints are not supported yet)");
}

}  // namespace qmpi
