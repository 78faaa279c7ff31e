// RAII for HDF5 identifiers: each kind of id is closed by its own H5?close function, so each
// gets its own handle type and an id can never be closed with the wrong one.
#pragma once
#include <hdf5.h>

#include <utility>

namespace qmpi {

template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  // Takes ownership of `id`; a negative id (a failed HDF5 call) makes an empty handle.
  explicit H5Handle(hid_t id) : id_(id) {}
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { reset(); }

  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using H5File = H5Handle<H5Fclose>;
using H5Group = H5Handle<H5Gclose>;
using H5Dataset = H5Handle<H5Dclose>;
using H5Space = H5Handle<H5Sclose>;
using H5Plist = H5Handle<H5Pclose>;
using H5Attr = H5Handle<H5Aclose>;
using H5Type = H5Handle<H5Tclose>;

}  // namespace qmpi
