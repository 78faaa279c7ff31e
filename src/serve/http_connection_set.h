// The gateway's open connections. It holds each one (a connection waiting for the engine has no
// I/O in flight to keep it alive) until the connection closes itself, and lets the gateway
// close them all when it stops.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace qmpi {

class HttpConnection;

class HttpConnectionSet {
 public:
  void add(std::shared_ptr<HttpConnection> c);
  void remove(const HttpConnection* c);
  size_t size() const;
  // Every connection closes once its response is written; idle ones close at once.
  void shut_all();
  // Waits until every connection has closed or `deadline` passed; true when none is left.
  bool wait_empty(std::chrono::steady_clock::time_point deadline);
  // Drops the connections left (their requests in flight are cancelled). Call with the I/O
  // threads stopped.
  void clear();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<const HttpConnection*, std::shared_ptr<HttpConnection>> conns_;
};

}  // namespace qmpi
