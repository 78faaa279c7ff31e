#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace qmpi {
namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(std::string path, Err missing_code) : path_(std::move(path)) {
  Fd fd{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) raise(missing_code, "cannot open " + path_ + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0)
    raise(Err::InputFile, "cannot stat " + path_ + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) raise(Err::InputFile, path_ + " is not a regular file");
  size_ = uint64_t(st.st_size);
  if (size_ == 0) return;  // mmap rejects length 0; an empty file simply has no bytes
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    raise(Err::InputFile, "cannot map " + path_ + " (" + std::to_string(size_) +
                              " bytes): " + std::strerror(errno));
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace qmpi
