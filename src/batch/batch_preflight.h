// What `qmpi batch` checks of its files before a weight is read, so that a wrong path fails in
// a second, not after minutes of loading: the input is a readable file that starts like JSONL,
// the output's folder is writable, and an output with results in it is only reused with
// --resume or --overwrite.
#pragma once

namespace qmpi {

struct BatchJobOptions;

// Raises InputFile or OutputFile (and what check_distinct_batch_files raises).
void check_batch_files(const BatchJobOptions& opts);

// Raises OutputFile when --output already holds results and neither --resume nor --overwrite
// is given (also checked again when the job opens its files).
void check_output_reusable(const BatchJobOptions& opts);

}  // namespace qmpi
