#include "text/jinja_limits.h"

#include <charconv>

#include "core/byte_size.h"
#include "core/errors.h"

namespace qmpi::jinja {

Limits parse_limits(std::string_view spec) {
  constexpr const char* kOption = "--chat-template-limits";
  Limits l;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    auto bad = [&](const std::string& why) {
      raise(Err::Usage, std::string(kOption) + " '" + std::string(item) + "': " + why,
            "Write KEY=N pairs separated by commas, keys steps, loop, depth, render-depth and "
            "output, e.g. --chat-template-limits steps=20000000,output=256MiB.");
    };
    if (key == "output") {
      l.output_bytes = size_t(parse_byte_size(value, kOption));
      if (l.output_bytes == 0) bad("the output limit must be positive");
      continue;
    }
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n <= 0)
      bad("expected a positive integer after '='");
    if ((key == "depth" || key == "render-depth") && n > 1000)
      bad("a depth above 1000 could overflow a thread's stack");  // each level is a few frames
    if (key == "steps")
      l.steps = n;
    else if (key == "loop")
      l.loop_iterations = n;
    else if (key == "depth")
      l.parse_depth = int(n);
    else if (key == "render-depth")
      l.render_depth = int(n);
    else
      bad("unknown limit '" + key + "'");
  }
  return l;
}

}  // namespace qmpi::jinja
