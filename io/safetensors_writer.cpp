#include "io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace qmpi {
namespace {

constexpr uint64_t kChunkBytes = 8u << 20;  // bounds the writer's memory whatever the tensor size

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void write_bytes(std::FILE* f, const void* p, size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n)
    raise(Err::OutputFile, "cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill) {
  for (const auto& e : entries_)
    if (e.name == name)
      raise(Err::Internal, "safetensors writer: tensor '" + name + "' added twice");
  entries_.push_back({std::move(name), dtype, std::move(shape), std::move(fill)});
}

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t total = 0;
  for (const auto& e : entries_) total += uint64_t(numel(e.shape)) * dtype_size(e.dtype);
  return total;
}

uint64_t SafetensorsWriter::write(const std::string& path) const {
  std::vector<const Entry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry* e : order) {
    uint64_t n = uint64_t(numel(e->shape)) * dtype_size(e->dtype);
    header[e->name] = {{"dtype", dtype_name(e->dtype)},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) raise(Err::OutputFile, "cannot create " + path + ": " + std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  write_bytes(f.get(), len, 8, path);
  write_bytes(f.get(), text.data(), text.size(), path);

  std::vector<uint8_t> chunk;
  for (const Entry* e : order) {
    const size_t esize = dtype_size(e->dtype);
    const int64_t total = numel(e->shape);
    const int64_t per_chunk = int64_t(std::max<uint64_t>(1, kChunkBytes / esize));
    chunk.resize(size_t(std::min(total, per_chunk)) * esize);
    for (int64_t first = 0; first < total; first += per_chunk) {
      const int64_t count = std::min(per_chunk, total - first);
      e->fill(first, count, chunk.data());
      write_bytes(f.get(), chunk.data(), size_t(count) * esize, path);
    }
  }
  if (std::fflush(f.get()) != 0)
    raise(Err::OutputFile, "cannot write " + path + ": " + std::strerror(errno));
  return 8 + text.size() + offset;
}

void write_safetensors_index(const std::string& dir, uint64_t total_size,
                             const std::map<std::string, std::string>& weight_map) {
  nlohmann::ordered_json j;
  j["metadata"] = {{"total_size", total_size}};
  j["weight_map"] = weight_map;
  const std::string path = dir + "/" + kSafetensorsIndexName;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) raise(Err::OutputFile, "cannot write " + path);
}

}  // namespace qmpi
