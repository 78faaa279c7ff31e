#include "core/logging.h"

#include <cstdlib>
#include <optional>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"

namespace qmpi {
namespace {

// spdlog reads an unknown name as "off", which would silence errors too.
std::optional<spdlog::level::level_enum> parse_level(const std::string& name) {
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  return std::nullopt;
}

}  // namespace

void init_logging() {
  auto logger = spdlog::stderr_logger_mt("qmpi");
  logger->set_pattern("[%H:%M:%S.%e %l] %v");
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
  const char* env = std::getenv("QMPI_LOG_LEVEL");
  if (!env || !*env) return;
  if (const auto level = parse_level(env))
    logger->set_level(*level);
  else
    spdlog::warn("QMPI_LOG_LEVEL={} is not debug, info, warn or error; logging at info", env);
}

void set_log_level(const std::string& level) {
  const auto parsed = parse_level(level);
  if (!parsed)
    raise(Err::Usage, "--log-level " + level + " is not debug, info, warn or error",
          "Give --log-level debug, info (the default), warn or error.");
  spdlog::set_level(*parsed);
}

}  // namespace qmpi
