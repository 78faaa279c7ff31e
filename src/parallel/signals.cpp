#include "parallel/signals.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>

#include "core/errors.h"
#include "parallel/launcher.h"

namespace qmpi {
namespace {

// A signal handler can reach only static state; these are the whole of it.
std::atomic<int> g_first_signal{0};
std::atomic<int> g_signal_count{0};
std::atomic<pid_t> g_first_sender{0};
std::atomic<int64_t> g_first_at_ns{0};  // CLOCK_MONOTONIC, as steady_clock on Linux
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<pid_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);
char g_second_message[1024];
size_t g_second_message_len = 0;
int g_second_exit_code = 1;
// stop_ends_job's answer once known (-1: not yet asked): the first sender never changes, and the
// job-end waits ask on every spin, so /proc is read once, outside the handler.
std::atomic<int> g_sender_is_launcher{-1};

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void on_signal(int sig, siginfo_t* info, void*) {
  int expected = 0;
  if (g_first_signal.compare_exchange_strong(expected, sig)) {
    g_first_sender = info ? info->si_pid : 0;
    g_first_at_ns = monotonic_ns();
  }
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
  g_first_sender = 0;
  g_sender_is_launcher = -1;

  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
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

bool stop_ends_job() {
  if (!stop_requested()) return false;
  int known = g_sender_is_launcher.load();
  if (known < 0) {
    const pid_t sender = g_first_sender.load();
    known = sender != 0 && sender == getppid() && is_open_mpi_launcher(sender) ? 1 : 0;
    g_sender_is_launcher = known;
  }
  return known == 1;
}

double seconds_since_stop() {
  return stop_requested() ? double(monotonic_ns() - g_first_at_ns.load()) * 1e-9 : 0.0;
}

bool stop_requested_anywhere(Comm& world) {
  float flag = stop_requested() ? 1.0f : 0.0f;
  world.all_reduce_sum(&flag, 1);
  return flag > 0;
}

}  // namespace qmpi
