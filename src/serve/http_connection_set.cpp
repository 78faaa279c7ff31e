#include "serve/http_connection_set.h"

#include <vector>

#include "serve/http_connection.h"

namespace qmpi {

void HttpConnectionSet::add(std::shared_ptr<HttpConnection> c) {
  std::lock_guard lock(mu_);
  const HttpConnection* key = c.get();
  conns_.emplace(key, std::move(c));
}

void HttpConnectionSet::remove(const HttpConnection* c) {
  std::shared_ptr<HttpConnection> last;  // destroyed outside the lock
  {
    std::lock_guard lock(mu_);
    const auto it = conns_.find(c);
    if (it == conns_.end()) return;
    last = std::move(it->second);
    conns_.erase(it);
    if (conns_.empty()) cv_.notify_all();
  }
}

size_t HttpConnectionSet::size() const {
  std::lock_guard lock(mu_);
  return conns_.size();
}

void HttpConnectionSet::shut_all() {
  std::vector<std::shared_ptr<HttpConnection>> all;
  {
    std::lock_guard lock(mu_);
    all.reserve(conns_.size());
    for (const auto& [key, c] : conns_) all.push_back(c);
  }
  for (const auto& c : all) c->shut();
}

bool HttpConnectionSet::wait_empty(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return conns_.empty(); });
}

void HttpConnectionSet::clear() {
  std::unordered_map<const HttpConnection*, std::shared_ptr<HttpConnection>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(conns_);
  }
  all.clear();
}

}  // namespace qmpi
