#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "core/errors.h"

namespace qmpi {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

}  // namespace

void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  // Magic (6) + version (2) + length (2) + dict + '\n' must be a multiple of 64 (NEP 1).
  const size_t used = 10 + dict.size() + 1;
  dict.append((64 - used % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) raise(Err::OutputFile, "cannot create " + path);
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t len = uint16_t(dict.size());
  const char len_le[2] = {char(len & 0xff), char(len >> 8)};
  out.write(len_le, 2);
  out.write(dict.data(), std::streamsize(dict.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(rows * cols * 4));
  if (!out) raise(Err::OutputFile, "cannot write " + path);
}

NpyArray read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(Err::InputFile, "cannot open " + path);
  char head[10];
  if (!in.read(head, 10) || std::memcmp(head, kMagic, 6) != 0)
    raise(Err::InputFile, path + " is not a .npy file");
  const int major = head[6];
  size_t len = uint8_t(head[8]) | size_t(uint8_t(head[9])) << 8;
  if (major >= 2) {  // versions 2 and 3 use a 4-byte header length
    char more[2];
    if (!in.read(more, 2)) raise(Err::InputFile, path + ": truncated .npy header");
    len |= size_t(uint8_t(more[0])) << 16 | size_t(uint8_t(more[1])) << 24;
  }
  std::string dict(len, '\0');
  if (!in.read(dict.data(), std::streamsize(len)))
    raise(Err::InputFile, path + ": truncated .npy header");
  if (dict.find("'<f4'") == std::string::npos ||
      dict.find("'fortran_order': False") == std::string::npos)
    raise(Err::InputFile,
          path + ": only little-endian float32 C-order .npy files are supported (" + dict + ")");
  std::smatch m;
  static const std::regex shape_re(R"('shape':\s*\(([^)]*)\))");
  if (!std::regex_search(dict, m, shape_re))
    raise(Err::InputFile, path + ": .npy header has no shape");
  NpyArray a;
  int64_t numel = 1;
  static const std::regex dim_re(R"(\d+)");
  const std::string dims = m[1].str();
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), dim_re);
       it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoll(it->str()));
    numel *= a.shape.back();
  }
  a.data.resize(size_t(numel));
  if (!in.read(reinterpret_cast<char*>(a.data.data()), std::streamsize(numel * 4)))
    raise(Err::InputFile, path + ": .npy data is shorter than its shape " + dims);
  return a;
}

}  // namespace qmpi
