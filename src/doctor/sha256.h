// `qmpi doctor --verify-sha256 MANIFEST`: the manifest format (what `sha256sum FILES > MANIFEST`
// writes) and file digests (OpenSSL's SHA-256, which uses the CPU's SHA instructions).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qmpi::doctor {

struct ManifestEntry {
  std::string sha256;  // 64 lowercase hex digits
  std::string file;    // as written in the manifest (relative names are relative to the model)
};

// Lines "<64 hex>  <name>" (text mode) or "<64 hex> *<name>" (binary mode); blank lines and
// lines starting with '#' are skipped. Throws Error(InputFile) naming `source` and the line for
// anything else, or for a manifest that lists no file.
std::vector<ManifestEntry> parse_sha256_manifest(std::string_view text, const std::string& source);
// Reads and parses `path`; Error(InputFile) when it cannot be read.
std::vector<ManifestEntry> read_sha256_manifest(const std::string& path);

std::string sha256_hex(std::string_view data);
// Streams the file through SHA-256; Error(InputFile) when it cannot be read. `bytes` receives
// its size when not null.
std::string sha256_file(const std::string& path, uint64_t* bytes = nullptr);

}  // namespace qmpi::doctor
