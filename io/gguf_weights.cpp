#include "io/gguf_weights.h"

#include <cstdio>
#include <regex>

#include "core/errors.h"
#include "io/checkpoint_dir.h"

namespace qmpi {
namespace {

std::optional<DType> dense_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return DType::F32;
    case GgmlType::F16:
      return DType::F16;
    case GgmlType::BF16:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

TensorInfo describe(const GgufTensor& t, const std::string& file) {
  TensorInfo info;
  info.name = t.name;
  info.shape.assign(t.ne.rbegin(), t.ne.rend());
  info.nbytes = t.nbytes;
  info.file = file;
  info.ggml = t.type;
  info.dtype = dense_dtype(t.type->type).value_or(DType::U8);
  return info;
}

// split.KEY of a part, required.
int64_t split_key(const GgufFile& f, const std::string& key) {
  auto v = f.integer("split." + key);
  if (!v)
    raise(Err::GgufSplit,
          f.path() + " is named as a part of a split model but has no split." + key + " key");
  return *v;
}

}  // namespace

std::vector<std::string> gguf_part_paths(const std::string& path) {
  static const std::regex kPart(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  if (!std::regex_match(path, m, kPart)) return {path};
  const int no = std::stoi(m[2].str()), count = std::stoi(m[3].str());
  if (count < 1 || no < 1 || no > count)
    raise(Err::GgufSplit, path + " is named part " + m[2].str() + " of " + m[3].str());
  char first[32];
  std::snprintf(first, sizeof first, "-00001-of-%05d.gguf", count);
  if (no != 1)
    raise(Err::GgufSplit,
          path + " is part " + std::to_string(no) + " of a split model whose first part is " +
              m[1].str() + first,
          "Pass the first part to --model; qmpi opens the others.");
  std::vector<std::string> parts;
  for (int i = 1; i <= count; ++i) {
    char tail[32];
    std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", i, count);
    parts.push_back(m[1].str() + tail);
  }
  return parts;
}

GgufWeights::GgufWeights(const std::string& path) {
  const std::vector<std::string> paths = gguf_part_paths(path);
  parts_.emplace_back(paths[0], Err::ModelDirMissing);
  if (paths.size() > 1 || meta().find("split.count")) {
    const int64_t count = split_key(meta(), "count");
    if (count != int64_t(paths.size()))
      raise(Err::GgufSplit, path + " says split.count " + std::to_string(count) +
                                " but its name says " + std::to_string(paths.size()) + " parts");
    for (size_t i = 1; i < paths.size(); ++i) parts_.emplace_back(paths[i], Err::GgufSplit);
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (split_key(parts_[i], "no") != int64_t(i) || split_key(parts_[i], "count") != count)
        raise(Err::GgufSplit,
              parts_[i].path() + " says split.no " + std::to_string(split_key(parts_[i], "no")) +
                  " of " + std::to_string(split_key(parts_[i], "count")) + ", but it is part " +
                  std::to_string(i) + " (from 0) of " + std::to_string(count));
    }
  }
  for (const GgufFile& f : parts_)
    for (const GgufTensor& t : f.tensors()) {
      if (!tensors_.emplace(t.name, Entry{describe(t, f.path()), f.bytes() + t.offset}).second)
        raise(Err::GgufSplit, "tensor " + t.name + " is in " + f.path() + " and in " +
                                  tensors_.at(t.name).info.file);
      order_.push_back(t.name);
    }
  if (auto total = meta().integer("split.tensors.count"); total && *total != int64_t(order_.size()))
    raise(Err::GgufSplit, path + " says split.tensors.count " + std::to_string(*total) +
                              " but its " + std::to_string(parts_.size()) + " parts hold " +
                              std::to_string(order_.size()) + " tensors");
}

bool GgufWeights::has(const std::string& name) const {
  return tensors_.count(name) > 0;
}

const TensorInfo& GgufWeights::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    raise(Err::TensorMissing, "tensor " + name + " is not in " + meta().path());
  return it->second.info;
}

std::vector<std::string> GgufWeights::names() const {
  return order_;
}

void GgufWeights::read(const std::string& name, const Slice& slice, void* dst) {
  info(name);
  const Entry& e = tensors_.at(name);
  if (!e.info.block_quantized()) {
    bytes_read_ += copy_slice(e.data, e.info, slice, dst);
    return;
  }
  // The same slice in bytes: the last dimension becomes the row's bytes, cut on block edges.
  TensorInfo bytes = e.info;
  const int64_t cols = bytes.shape.back(), blk = e.info.ggml->block_elems;
  bytes.shape.back() = ggml_bytes(*e.info.ggml, cols);
  Slice s = slice;
  if (s.length >= 0 && size_t(s.dim) + 1 == bytes.shape.size()) {
    const int64_t end = s.start + s.length;
    if (s.start % blk != 0 || (end % blk != 0 && end != cols))
      raise(Err::Internal, "columns [" + std::to_string(s.start) + ", " + std::to_string(end) +
                               ") of " + name + " cut its " + std::string(e.info.ggml->name) +
                               " blocks of " + std::to_string(blk));
    s.start = ggml_bytes(*e.info.ggml, s.start);
    s.length = ggml_bytes(*e.info.ggml, s.length);
  }
  bytes_read_ += copy_slice(e.data, bytes, s, dst);
}

}  // namespace qmpi
