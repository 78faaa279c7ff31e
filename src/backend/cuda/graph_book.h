// Which steps the CUDA backend records as CUDA graphs (--cuda-graphs) and when it replays one:
// host logic only, tested without a device (tests/unit/cuda/graph_book_test.cpp).
//
// A graph repeats the exact launches it recorded: kernel arguments, grid sizes and device
// pointers. So only decode steps are recorded (a prefill's token count changes with each
// prompt), keyed by their token count and a context bound; a graph is replayed while nothing was
// freed since it was recorded (a freed buffer may be one it points at), and a shape is first run
// eagerly once, so that the buffers it needs have grown before a graph records their addresses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>

#include "backend/backend.h"

namespace qmpi::cuda {

inline constexpr int64_t kGraphMaxTokens = 64;  // decode batches recorded: 1..64 sequences
inline constexpr size_t kMaxGraphs = 64;        // graphs held at once; further shapes run eagerly
inline constexpr int32_t kGraphMinContext = 256;

struct GraphKey {
  int64_t tokens = 0;
  int32_t context = 0;  // graph_context() of the step's longest context
  auto operator<=>(const GraphKey&) const = default;
};

// The attention launch (its flash-decoding split) is part of a graph, so a recorded step plans
// it for a bound rather than for its own longest context: `max_context` rounded up to a power of
// two, at least kGraphMinContext. Steps replay the graph while their contexts fit the bound.
int32_t graph_context(int32_t max_context);

// The key of a step, or none when the step is not recorded: no tokens, not a decode, more than
// kGraphMaxTokens tokens, or a context past what a power-of-two bound can hold.
std::optional<GraphKey> graph_key(const StepShape& shape);

enum class GraphAction { Eager, Capture, Replay };

struct GraphDecision {
  GraphAction action = GraphAction::Eager;
  bool drop_all = false;  // the graphs recorded so far may point at freed memory
};

class GraphBook {
 public:
  // What to do with a step of `key`; `frees` counts the device allocator's frees so far.
  GraphDecision next(const GraphKey& key, uint64_t frees);
  void recorded(const GraphKey& key) { recorded_.insert(key); }
  // The step could not be recorded (an op that waits for the device, say): eager from now on.
  void refused(const GraphKey& key) { refused_.insert(key); }

 private:
  std::set<GraphKey> seen_, recorded_, refused_;
  std::optional<uint64_t> frees_;
};

}  // namespace qmpi::cuda
