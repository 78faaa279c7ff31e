// A read-only memory map of a whole file. Pages are only read from disk when touched, so a rank
// that copies out its slices never reads the bytes of tensors it does not own.
#pragma once
#include <cstdint>
#include <string>

#include "core/errors.h"

namespace qmpi {

class MappedFile {
 public:
  // Throws Error(missing_code) when the file cannot be opened, Error(InputFile) when it cannot
  // be mapped.
  explicit MappedFile(std::string path, Err missing_code = Err::InputFile);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const uint8_t* data_ = nullptr;  // null for an empty file
  uint64_t size_ = 0;
};

}  // namespace qmpi
