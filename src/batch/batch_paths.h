// The files of a batch job must be distinct: writing --output (or --output-h5) over --input
// would empty the input before a line is read (`--input f --output f --overwrite` left an empty
// file and "0 ok"). Checked before the weights load, through symlinks and hard links.
#pragma once
#include <string>

namespace qmpi {

struct BatchJobOptions;

// Raises OutputFile when two of --input, --output, --output-h5 name the same file.
void check_distinct_batch_files(const BatchJobOptions& opts);

// Whether `a` and `b` name one file: the same inode when both exist, else the same path once
// symlinks and ".." are resolved.
bool same_file(const std::string& a, const std::string& b);

}  // namespace qmpi
