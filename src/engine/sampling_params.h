// Per-request sampling settings, carried with every step to the last pipeline stage, where
// sampling happens next to the logits; and the one table of its scalar fields.
//
// kSamplingFields drives everything a scalar sampling field needs besides its use in the
// sampler: the request parser (name, type, range), the range check of resolved values, the
// resolver's overlay of given values on the model's defaults, the step wire format (in table
// order) and `qmpi run`'s options (--top-p for top_p). Adding one: a member below with its
// neutral default, and a row in the table.
#pragma once
#include <bitset>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace qmpi {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = -1;  // -1 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  int32_t top_logprobs = 0;  // alternatives to report with each sampled token (0 = none)

  bool greedy() const { return temperature <= 0.0f; }
};

// The values a field takes: [min, max] (an end open where min_open / max_open), and `off`
// besides where it is set (top_k's -1).
struct SamplingRange {
  double min, max;
  bool min_open, max_open;
  std::optional<double> off;

  bool allows(double v) const {
    if (off && v == *off) return true;
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
  // "in [0, 100]", "-1 (off) or at least 1": how an error message states it.
  std::string text() const;
};
constexpr SamplingRange closed(double min, double max) {
  return {min, max, false, false, std::nullopt};
}
constexpr SamplingRange above(double min, double max) {  // (min, max]
  return {min, max, true, false, std::nullopt};
}
constexpr SamplingRange at_least_or_off(double min, double off) {  // integers
  return {min, std::numeric_limits<int32_t>::max(), false, false, off};
}
constexpr SamplingRange any_value() {
  return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), false,
          false, std::nullopt};
}

// One scalar sampling field.
struct SamplingField {
  std::string_view name;  // the request field; the option is the same with '-' for '_'
  std::variant<float SamplingParams::*, int32_t SamplingParams::*, uint64_t SamplingParams::*>
      member;
  SamplingRange range;
  std::string_view help;  // the option's --help line
  // The option sets the field to its default when not given (--seed 0), as a request does not.
  bool option_default;
};

inline constexpr SamplingField kSamplingFields[] = {
    {"temperature", &SamplingParams::temperature, closed(0, 100), "0 = greedy", false},
    {"top_p", &SamplingParams::top_p, above(0, 1), "nucleus sampling mass, (0, 1]", false},
    {"top_k", &SamplingParams::top_k, at_least_or_off(1, -1),
     "keep the k most likely tokens (-1 = off)", false},
    {"min_p", &SamplingParams::min_p, closed(0, 1),
     "drop tokens below min-p times the most likely one", false},
    {"repetition_penalty", &SamplingParams::repetition_penalty, above(0, 10), "1 = off", false},
    {"presence_penalty", &SamplingParams::presence_penalty, closed(-2, 2), "0 = off", false},
    {"frequency_penalty", &SamplingParams::frequency_penalty, closed(-2, 2), "0 = off", false},
    {"seed", &SamplingParams::seed, any_value(), "sampling seed", true},
};
inline constexpr size_t kSamplingFieldCount = std::size(kSamplingFields);

// The table's fields as a request or the command line gave them: `values` holds each given one
// (the others keep SamplingParams' defaults), `given` says which, by row.
struct GivenSampling {
  SamplingParams values;
  std::bitset<kSamplingFieldCount> given;

  template <class T>
  void set(T SamplingParams::*member, std::type_identity_t<T> v) {
    values.*member = v;
    given.set(row_of(member));
  }
  template <class T>
  std::optional<T> get(T SamplingParams::*member) const {
    if (!given.test(row_of(member))) return std::nullopt;
    return values.*member;
  }

 private:
  template <class T>
  static size_t row_of(T SamplingParams::*member) {
    for (size_t i = 0; i < kSamplingFieldCount; ++i)
      if (const auto* m = std::get_if<T SamplingParams::*>(&kSamplingFields[i].member);
          m && *m == member)
        return i;
    return kSamplingFieldCount;  // not in the table: bitset::set/test throw out_of_range
  }
};

// The value of `row` in `p` as a double (for range checks and messages).
double sampling_value(const SamplingParams& p, const SamplingField& row);

}  // namespace qmpi
