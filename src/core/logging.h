// Log setup: plain text on stderr (no colour codes: mpirun forwards output through a pty, so
// colour would end up in log files), one line per message.
#pragma once

namespace qmpi {

void init_logging();

}  // namespace qmpi
