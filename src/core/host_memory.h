// The host's free memory as Linux reports it: the CPU backend's default budgets.
#pragma once
#include <cstdint>

namespace qmpi {

// MemAvailable from /proc/meminfo (0 when unreadable).
uint64_t host_available_memory();

}  // namespace qmpi
