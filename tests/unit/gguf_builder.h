// GGUF files built field by field for tests, so each test can write exactly the metadata and
// tensors it needs, or break exactly one thing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "io/gguf_file.h"

namespace qmpi::testing {

struct GgufBuilder {
  uint32_t magic = 0x46554747, version = 3;
  std::vector<uint8_t> kv, infos, data;
  uint64_t n_kv = 0, n_tensors = 0;

  template <class T>
  static void put(std::vector<uint8_t>& out, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  static void put_str(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  template <class T>
  void scalar(const std::string& key, GgufKind kind, T v) {
    put_str(kv, key);
    put<uint32_t>(kv, uint32_t(kind));
    put<T>(kv, v);
    ++n_kv;
  }
  void string(const std::string& key, const std::string& v) {
    put_str(kv, key);
    put<uint32_t>(kv, uint32_t(GgufKind::String));
    put_str(kv, v);
    ++n_kv;
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    put_str(kv, key);
    put<uint32_t>(kv, uint32_t(GgufKind::Array));
    put<uint32_t>(kv, uint32_t(GgufKind::String));
    put<uint64_t>(kv, v.size());
    for (const auto& s : v) put_str(kv, s);
    ++n_kv;
  }
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    put_str(kv, key);
    put<uint32_t>(kv, uint32_t(GgufKind::Array));
    put<uint32_t>(kv, uint32_t(GgufKind::I32));
    put<uint64_t>(kv, v.size());
    for (int32_t x : v) put<int32_t>(kv, x);
    ++n_kv;
  }
  // A tensor with extents `ne` (innermost first) whose bytes are `bytes`, placed at the next
  // aligned data offset unless `offset` says otherwise.
  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
              const std::vector<uint8_t>& bytes, int64_t offset = -1) {
    while (data.size() % 32) data.push_back(0);
    put_str(infos, name);
    put<uint32_t>(infos, uint32_t(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(infos, n);
    put<uint32_t>(infos, type);
    put<uint64_t>(infos, offset >= 0 ? uint64_t(offset) : data.size());
    data.insert(data.end(), bytes.begin(), bytes.end());
    ++n_tensors;
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    put<uint32_t>(out, magic);
    put<uint32_t>(out, version);
    put<uint64_t>(out, n_tensors);
    put<uint64_t>(out, n_kv);
    out.insert(out.end(), kv.begin(), kv.end());
    out.insert(out.end(), infos.begin(), infos.end());
    while (out.size() % 32) out.push_back(0);
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
  void write(const std::string& path, size_t cut = SIZE_MAX) const {
    const auto b = bytes();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(std::min(cut, b.size())));
  }
};

}  // namespace qmpi::testing
