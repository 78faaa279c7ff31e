#include "core/logging.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace qmpi {

void init_logging() {
  auto logger = spdlog::stderr_logger_mt("qmpi");
  logger->set_pattern("[%H:%M:%S.%e %l] %v");
  const char* level = std::getenv("QMPI_LOG_LEVEL");  // debug, info, warn, error
  logger->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace qmpi
