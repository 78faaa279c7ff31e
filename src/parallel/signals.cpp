#include "parallel/signals.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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
// A SIGCONT from this process's parent, not yet looked at (0: none). Open MPI's launcher opens
// the ending of a job with it: SIGCONT, odls_base_sigkill_timeout seconds, SIGTERM, as long
// again, SIGKILL (Open MPI 4.1, measured). Shells send SIGCONT too (fg/bg), so only one from a
// parent that is a launcher counts, which the handler cannot check (it reads /proc).
std::atomic<pid_t> g_parent_cont{0};

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

constexpr int64_t kRelayWindowNs = 500'000'000;

void on_cont(int, siginfo_t* info, void*) {
  if (info && info->si_pid != 0 && info->si_pid == getppid()) g_parent_cont = info->si_pid;
}

void on_signal(int sig, siginfo_t* info, void*) {
  int expected = 0;
  if (g_first_signal.compare_exchange_strong(expected, sig)) {
    g_first_sender = info ? info->si_pid : 0;
    g_first_at_ns = monotonic_ns();
  }
  // A Ctrl-C reaches the ranks from the terminal and again from a launch script that passes it
  // on (launch/mpirun): the same stop from another sender within moments is not a second one.
  const pid_t sender = info ? info->si_pid : 0;
  if (g_signal_count.load() > 0 && sender != g_first_sender.load() &&
      monotonic_ns() - g_first_at_ns.load() < kRelayWindowNs)
    return;
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
  g_parent_cont = 0;

  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  struct sigaction cont = sa;
  cont.sa_sigaction = on_cont;
  sigaction(SIGCONT, &cont, &old_cont_);
}

SignalGuard::~SignalGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGCONT, &old_cont_, nullptr);
}

namespace {

// The launcher's SIGCONT, once confirmed, as the first stop signal: SIGTERM, which follows it.
void take_launcher_cont() {
  const pid_t parent = g_parent_cont.exchange(0);
  if (parent == 0 || !is_open_mpi_launcher(parent)) return;
  int expected = 0;
  if (!g_first_signal.compare_exchange_strong(expected, SIGTERM)) return;  // a signal came first
  g_first_sender = parent;
  g_first_at_ns = monotonic_ns();
  g_sender_is_launcher = 1;
  g_signal_count.fetch_add(1);
}

}  // namespace

bool stop_requested() {
  if (g_parent_cont.load() != 0) take_launcher_cont();
  return g_signal_count.load() > 0;
}

int stop_signal() {
  return g_first_signal.load();
}

bool stop_from_launcher() {
  if (!stop_requested()) return false;
  int known = g_sender_is_launcher.load();
  if (known < 0) {
    const pid_t sender = g_first_sender.load();
    known = sender != 0 && sender == getppid() && is_open_mpi_launcher(sender) ? 1 : 0;
    g_sender_is_launcher = known;
  }
  return known == 1;
}

double launcher_kill_grace_s() {
  const char* env = std::getenv("OMPI_MCA_odls_base_sigkill_timeout");
  char* end = nullptr;
  const double s = env ? std::strtod(env, &end) : 1.0;
  return env && (end == env || *end != '\0' || !(s >= 0)) ? 1.0 : s;
}

bool stop_ends_job() {
  return stop_from_launcher() && launcher_kill_grace_s() < kDrainableGraceS;
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
