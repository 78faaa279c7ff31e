// An eventfd that one thread signals and another polls (with zmq::poll next to its sockets), so
// the broker sleeps until a client or the engine has something for it.
#pragma once

namespace qmpi {

class WakeFd {
 public:
  WakeFd();  // raises Internal when the kernel refuses an eventfd
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  void signal();  // any thread; never blocks
  void drain();   // the polling thread, after the fd was readable
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace qmpi
