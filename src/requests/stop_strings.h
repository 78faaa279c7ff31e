// Detokenizes one sequence's output on rank 0 and watches it for stop strings. Text is released
// only once it cannot be the start of a stop string, so streamed pieces never show part of one
// and a stop string split across tokens ("</" + "end>") is still found; the text ends just
// before the first stop string.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace qmpi {

class StopStringMatcher {
 public:
  // `tokenizer` must outlive the matcher. Empty stop strings are ignored.
  StopStringMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops,
                    bool skip_special = true);

  // Adds one generated token; returns the text it releases (often empty). Once stopped(),
  // further tokens are ignored.
  std::string push(int32_t id);
  // End of the sequence: releases what was held back.
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything released so far

 private:
  std::string release(size_t n);
  std::string scan();

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string held_;  // decoded text that may still turn into a stop string
  std::string text_;
  bool stopped_ = false;
};

}  // namespace qmpi
