// Memory sizes as people write them ("24GiB", "80GB", "512MiB") and as the planner prints them.
#pragma once
#include <cstdint>
#include <string>

namespace qmpi {

// Binary (KiB MiB GiB TiB) and decimal (KB MB GB TB) suffixes, case-insensitive, optional space
// and fraction ("1.5 TiB"); a bare number is bytes. Throws Error(Usage) naming `option`.
uint64_t parse_byte_size(const std::string& text, const std::string& option);
// A GPU's memory as cards are sold ("80GB"): as parse_byte_size, and besides a bare number
// ("80") or a one-letter unit ("80G") is read in decimal units, GB for a bare number, with a
// sentence saying so in `note` (empty when the text was unambiguous).
uint64_t parse_gpu_memory(const std::string& text, const std::string& option, std::string& note);

std::string format_gib(uint64_t bytes);    // "24.10" (GiB, two decimals, no unit)
std::string format_gb(uint64_t bytes);     // "145.41 GB"
std::string format_bytes(uint64_t bytes);  // "320 KiB", "1.50 MiB", "24.10 GiB": the largest unit

}  // namespace qmpi
