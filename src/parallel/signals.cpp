#include "parallel/signals.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/errors.h"

namespace qmpi {
namespace {

// A signal handler can reach only static state; these are the whole of it.
std::atomic<int> g_first_signal{0};
std::atomic<int> g_signal_count{0};
static_assert(std::atomic<int>::is_always_lock_free);
char g_second_message[1024];
size_t g_second_message_len = 0;
int g_second_exit_code = 1;

void on_signal(int sig) {
  int expected = 0;
  g_first_signal.compare_exchange_strong(expected, sig);
  if (g_signal_count.fetch_add(1) == 0) return;
  // Second signal: only async-signal-safe calls from here on.
  ssize_t ignored = write(STDERR_FILENO, g_second_message, g_second_message_len);
  (void)ignored;
  _exit(g_second_exit_code);
}

}  // namespace

SignalGuard::SignalGuard(const std::string& who) {
  const auto& entry = error_entry(Err::Interrupted);
  std::string line = "error " + error_id(Err::Interrupted) + " (" + std::string(entry.name) +
                     "): " + who +
                     " got a second SIGINT/SIGTERM while stopping and ends the job now\n";
  g_second_message_len = std::min(line.size(), sizeof g_second_message);
  std::memcpy(g_second_message, line.data(), g_second_message_len);
  g_second_exit_code = entry.exit_code;
  g_first_signal = 0;
  g_signal_count = 0;

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

SignalGuard::~SignalGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool stop_requested() {
  return g_signal_count.load() > 0;
}

int stop_signal() {
  return g_first_signal.load();
}

bool stop_requested_anywhere(Comm& world) {
  float flag = stop_requested() ? 1.0f : 0.0f;
  world.all_reduce_sum(&flag, 1);
  return flag > 0;
}

}  // namespace qmpi
