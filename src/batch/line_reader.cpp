#include "batch/line_reader.h"

#include <cctype>

namespace qmpi {

bool read_bounded_line(std::istream& in, size_t max_bytes, BoundedLine& line) {
  line = BoundedLine{};
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (int c = buf->sbumpc(); c != std::char_traits<char>::eof(); c = buf->sbumpc()) {
    any = true;
    if (c == '\n') return true;
    ++line.bytes;
    if (!std::isspace(c)) line.blank = false;
    if (line.too_long) continue;
    if (line.text.size() == max_bytes) {
      line.too_long = true;
      line.text = std::string();  // give the memory back while the rest streams past
      continue;
    }
    line.text.push_back(char(c));
  }
  in.setstate(std::ios::eofbit);
  return any;
}

}  // namespace qmpi
