#include "doctor/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/errors.h"

namespace qmpi::doctor {
namespace {

struct Digest {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  Digest() {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
      raise(Err::Internal, "OpenSSL could not start a SHA-256 digest");
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::vector<ManifestEntry> parse_sha256_manifest(std::string_view text, const std::string& source) {
  std::vector<ManifestEntry> out;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') continue;
    // sha256sum writes "<hash><space><space or *><name>".
    if (line.size() < 67 || !is_hex64(line.substr(0, 64)) || line[64] != ' ' ||
        (line[65] != ' ' && line[65] != '*'))
      raise(Err::InputFile,
            source + " line " + std::to_string(line_no) +
                " is not \"<64 hex digits>  <file name>\" as sha256sum writes it: \"" +
                std::string(line.substr(0, 100)) + "\"",
            "Write the manifest with `sha256sum *.safetensors config.json > MANIFEST` in the "
            "model folder.");
    ManifestEntry e;
    e.sha256 = std::string(line.substr(0, 64));
    for (char& c : e.sha256) c = char(std::tolower(static_cast<unsigned char>(c)));
    e.file = std::string(line.substr(66));
    out.push_back(std::move(e));
  }
  if (out.empty()) raise(Err::InputFile, source + " lists no file");
  return out;
}

std::vector<ManifestEntry> read_sha256_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(Err::InputFile, "cannot read the sha256 manifest " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_sha256_manifest(ss.str(), path);
}

std::string sha256_hex(std::string_view data) {
  Digest d;
  d.update(data.data(), data.size());
  return d.hex();
}

std::string sha256_file(const std::string& path, uint64_t* bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) raise(Err::InputFile, "cannot open " + path + ": " + std::strerror(errno));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Digest d;
  std::vector<char> buf(size_t(8) << 20);
  uint64_t total = 0;
  while (true) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      raise(Err::InputFile, "cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    d.update(buf.data(), size_t(n));
    total += uint64_t(n);
  }
  if (bytes) *bytes = total;
  return d.hex();
}

}  // namespace qmpi::doctor
