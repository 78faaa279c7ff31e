// Log setup: plain text on stderr (no colour codes: mpirun forwards output through a pty, so
// colour would end up in log files), one line per message.
#pragma once
#include <string>

namespace qmpi {

// The level comes from QMPI_LOG_LEVEL (debug, info, warn, error; default info).
void init_logging();
// --log-level: one of the names above; anything else is a usage error.
void set_log_level(const std::string& level);

}  // namespace qmpi
