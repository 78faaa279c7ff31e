#include "parallel/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "parallel/replica_survival.h"
#include "parallel/signals.h"

namespace qmpi {
namespace {

using Clock = std::chrono::steady_clock;
// Busy tests first (a small all-reduce between idle cores completes within microseconds), then
// yields for up to a millisecond (oversubscribed ranks let their peers run), then sleeps.
constexpr int kBusyTests = 64;
constexpr auto kYieldSpin = std::chrono::microseconds(1000);
constexpr auto kFirstPause = std::chrono::microseconds(50);
constexpr auto kLongestPause = std::chrono::microseconds(200);
constexpr size_t kPeersNamed = 8;
// A pause of at most 200 us that took longer than this means the process was stopped or frozen
// (6 oversubscribed ranks on 2 cores still get a turn within milliseconds).
constexpr auto kFrozenPause = std::chrono::seconds(1);
// Of the second Open MPI leaves between its SIGTERM and its SIGKILL, what a wait may still use;
// the rest is for telling the clients (the abort hook).
constexpr double kJobEndGraceS = 0.25;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string rank_on_host(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " (host " + host + ")";
}

// "rank 3 (host a), rank 4 (host a) and 2 more"
std::string peers_named(const TimeoutReport& r) {
  std::string s;
  for (size_t i = 0; i < r.peers.size() && i < kPeersNamed; ++i)
    s += (i ? ", " : "") + rank_on_host(r.peers[i].first, r.peers[i].second);
  if (r.peers.size() > kPeersNamed)
    s += " and " + std::to_string(r.peers.size() - kPeersNamed) + " more";
  return s;
}

}  // namespace

bool wait_until_done(const std::function<bool()>& done, double timeout_s, double& waited_s) {
  const auto start = Clock::now();
  auto pause = kFirstPause;
  for (int i = 0; i < kBusyTests; ++i) {
    if (done()) {
      waited_s = std::chrono::duration<double>(Clock::now() - start).count();
      return true;
    }
  }
  Clock::duration frozen{0};  // time this process did not run, left out of the wait
  while (true) {
    const bool finished = done();
    const auto elapsed = Clock::now() - start - frozen;
    waited_s = std::chrono::duration<double>(elapsed).count();
    if (finished) return true;
    if (timeout_s > 0 && waited_s >= timeout_s) return false;
    if (job_end_cuts_waits()) return false;
    const auto before = Clock::now();
    if (elapsed < kYieldSpin) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestPause);
    }
    // Only the pause is measured, never the test: a test that blocks still counts.
    if (const auto took = Clock::now() - before; took > kFrozenPause) frozen += took;
  }
}

bool wait_with_deadline(MPI_Request& request, double timeout_s, double& waited_s,
                        MPI_Status* status) {
  return wait_until_done(
      [&] {
        int done = 0;
        MPI_Test(&request, &done, status);
        return done != 0;
      },
      timeout_s, waited_s);
}

Error comm_timeout_error(const TimeoutReport& r) {
  std::string msg = rank_on_host(r.world_rank, r.host) + " waited " + seconds(r.waited_s) + " in " +
                    r.operation + " on " + r.group + " without completing, ";
  std::string fix;
  if (r.point_to_point && r.peers.size() == 1) {
    const auto& [peer, host] = r.peers[0];
    msg += "waiting for " + rank_on_host(peer, host);
    fix = "Check rank " + std::to_string(peer) + " on host " + host +
          " (its log, whether it is still alive or reachable); raise --comm-timeout only if it "
          "is merely slow.";
  } else {
    msg += "waiting for its peers " + peers_named(r);
    fix = "One of these peers did not reach the same " +
          r.operation.substr(0, r.operation.find(' ')) +
          ": read their logs; raise --comm-timeout only if they are merely slow.";
  }
  return Error(Err::CommTimeout, msg, fix);
}

namespace {
std::function<void(const Error&)>& abort_hook() {
  static std::function<void(const Error&)> hook;
  return hook;
}
}  // namespace

bool job_end_cuts_waits() {
  return abort_hook() != nullptr && seconds_since_stop() >= kJobEndGraceS && stop_ends_job();
}

Error job_end_error(const TimeoutReport& r) {
  std::string msg =
      "the launcher (Open MPI) is ending the job, as it does when a rank died or "
      "it was interrupted itself; " +
      rank_on_host(r.world_rank, r.host) + " had waited " + seconds(r.waited_s) + " in " +
      r.operation + " on " + r.group + " for " + peers_named(r);
  msg += r.peers.size() == 1 ? ", which most likely died" : ", one of which most likely died";
  return Error(Err::RankDied, msg,
               "mpirun's own line (\"process rank N ... exited on signal\") names the rank that "
               "died: read its log and its host's kernel log (dmesg). The requests in flight got "
               "this error: send them again once the job is back (a batch job: --resume).");
}

void set_abort_hook(std::function<void(const Error&)> hook) {
  abort_hook() = std::move(hook);
}

void abort_job(const Error& error) {
  if (auto hook = std::exchange(abort_hook(), nullptr)) hook(error);
  const auto& e = error_entry(error.code());
  std::fprintf(stderr, "error %s (%s): %s; fix: %s\n", error_id(error.code()).c_str(),
               std::string(e.name).c_str(), error.message().c_str(), error.fix().c_str());
  std::fflush(stderr);
  // A lost replica's rank leaves alone: rank 0 notices the replica and the others go on.
  end_failed_rank(error.exit_code());
}

}  // namespace qmpi
