#include "batch/h5_results.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include <spdlog/spdlog.h>

#include "core/errors.h"

namespace qmpi {
namespace {

constexpr const char* kFormat = "qmpi-batch-results-1";

// An HDF5 handle closed by its own close function.
class H5Handle {
 public:
  H5Handle() = default;
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// HDF5 prints its error stack by default; qmpi reports errors itself.
class QuietH5 {
 public:
  QuietH5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietH5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

H5Handle string_type() {
  H5Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

struct Column {
  const char* name;
  hid_t (*file_type)();  // a function: the H5T_* globals are not constants
  bool tokens;           // one entry per token rather than per row
};

hid_t t_i64() {
  return H5T_STD_I64LE;
}
hid_t t_i32() {
  return H5T_STD_I32LE;
}
hid_t t_f32() {
  return H5T_IEEE_F32LE;
}
hid_t t_f64() {
  return H5T_IEEE_F64LE;
}
hid_t t_str() {
  return -1;
}  // variable-length string, made per use

const Column kColumns[] = {
    {"line", t_i64, false},          {"custom_id", t_str, false},   {"choice", t_i32, false},
    {"prompt_tokens", t_i64, false}, {"token_start", t_i64, false}, {"token_count", t_i64, false},
    {"finish_reason", t_str, false}, {"ttft_s", t_f64, false},      {"latency_s", t_f64, false},
    {"finished_unix", t_f64, false}, {"token_ids", t_i32, true},    {"logprobs", t_f32, true},
};
constexpr size_t kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);
// Positions in kColumns.
enum : size_t {
  kCustomId = 1,
  kTokenStart = 4,
  kTokenCount = 5,
  kRowColumns = 10,
  kTokenIds = 10,
  kLogprobs = 11
};

hsize_t length(hid_t ds) {
  H5Handle space(H5Dget_space(ds), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  return n;
}

}  // namespace

struct H5Results::Impl {
  std::string path;
  H5Handle file;
  H5Handle sets[kNumColumns];
  H5Handle str;
  std::vector<H5Row> pending;
  int64_t rows = 0;
  int64_t tokens = 0;

  [[noreturn]] void fail(const std::string& what) const {
    raise(Err::OutputFile, "cannot " + what + " " + path);
  }

  hid_t memory_type(size_t c) const {
    return kColumns[c].file_type == t_str   ? str.get()
           : kColumns[c].file_type == t_i64 ? H5T_NATIVE_INT64
           : kColumns[c].file_type == t_i32 ? H5T_NATIVE_INT32
           : kColumns[c].file_type == t_f32 ? H5T_NATIVE_FLOAT
                                            : H5T_NATIVE_DOUBLE;
  }

  void create() {
    file = H5Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) fail("create");
    for (size_t c = 0; c < kNumColumns; ++c) {
      hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = kColumns[c].tokens ? 16384 : 1024;
      H5Handle space(H5Screate_simple(1, &zero, &unlimited), H5Sclose);
      H5Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      H5Pset_chunk(props.get(), 1, &chunk);
      if (kColumns[c].file_type != t_str) H5Pset_deflate(props.get(), 1);
      const hid_t type = kColumns[c].file_type == t_str ? str.get() : kColumns[c].file_type();
      sets[c] = H5Handle(H5Dcreate2(file.get(), kColumns[c].name, type, space.get(), H5P_DEFAULT,
                                    props.get(), H5P_DEFAULT),
                         H5Dclose);
      if (!sets[c].ok()) fail(std::string("create dataset ") + kColumns[c].name + " in");
    }
    H5Handle aspace(H5Screate(H5S_SCALAR), H5Sclose);
    H5Handle attr(
        H5Acreate2(file.get(), "format", str.get(), aspace.get(), H5P_DEFAULT, H5P_DEFAULT),
        H5Aclose);
    const char* value = kFormat;
    H5Awrite(attr.get(), str.get(), &value);
  }

  // Opens an existing file and cuts its datasets back to the rows written whole. False when
  // it is not a readable results file.
  bool open_existing(std::unordered_set<std::string>& ids) {
    file = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) return false;
    for (size_t c = 0; c < kNumColumns; ++c) {
      sets[c] = H5Handle(H5Dopen2(file.get(), kColumns[c].name, H5P_DEFAULT), H5Dclose);
      if (!sets[c].ok()) return false;
    }
    hsize_t n = ~hsize_t(0);
    for (size_t c = 0; c < kNumColumns; ++c)
      if (!kColumns[c].tokens) n = std::min(n, length(sets[c].get()));
    std::vector<int64_t> start(n), count(n);
    if (n > 0 && (H5Dread(sets[kTokenStart].get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                          start.data()) < 0 ||
                  H5Dread(sets[kTokenCount].get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                          count.data()) < 0))
      return false;
    // Tokens are written before the rows that point at them; a row pointing past them was cut.
    const hsize_t token_len =
        std::min(length(sets[kTokenIds].get()), length(sets[kLogprobs].get()));
    while (n > 0 && hsize_t(start[n - 1] + count[n - 1]) > token_len) --n;
    rows = int64_t(n);
    tokens = n > 0 ? start[n - 1] + count[n - 1] : 0;
    for (size_t c = 0; c < kNumColumns; ++c) {
      hsize_t len = kColumns[c].tokens ? hsize_t(tokens) : hsize_t(rows);
      if (H5Dset_extent(sets[c].get(), &len) < 0) return false;
    }
    if (rows > 0) {
      std::vector<char*> names(size_t(rows), nullptr);
      H5Handle space(H5Dget_space(sets[kCustomId].get()), H5Sclose);
      if (H5Dread(sets[kCustomId].get(), str.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, names.data()) <
          0)
        return false;
      for (char* s : names) ids.insert(s ? s : "");
      H5Dvlen_reclaim(str.get(), space.get(), H5P_DEFAULT, names.data());
    }
    return true;
  }

  void append_column(size_t c, const void* data, hsize_t n) {
    if (n == 0) return;
    const hid_t ds = sets[c].get();
    hsize_t at = length(ds), total = at + n;
    if (H5Dset_extent(ds, &total) < 0) fail("extend");
    H5Handle fspace(H5Dget_space(ds), H5Sclose);
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &at, nullptr, &n, nullptr);
    H5Handle mspace(H5Screate_simple(1, &n, nullptr), H5Sclose);
    if (H5Dwrite(ds, memory_type(c), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
      fail("write to");
  }

  void write_pending() {
    if (pending.empty()) return;
    std::vector<int32_t> ids;
    std::vector<float> lps;
    std::vector<int64_t> line, prompt, start, count;
    std::vector<int32_t> choice;
    std::vector<const char*> cid, reason;
    std::vector<double> ttft, latency, finished;
    int64_t at = tokens;
    for (const H5Row& r : pending) {
      ids.insert(ids.end(), r.token_ids.begin(), r.token_ids.end());
      lps.insert(lps.end(), r.logprobs.begin(), r.logprobs.end());
      line.push_back(r.line);
      cid.push_back(r.custom_id.c_str());
      choice.push_back(r.choice);
      prompt.push_back(r.prompt_tokens);
      start.push_back(at);
      count.push_back(int64_t(r.token_ids.size()));
      at += int64_t(r.token_ids.size());
      reason.push_back(r.finish_reason.c_str());
      ttft.push_back(r.ttft_s);
      latency.push_back(r.latency_s);
      finished.push_back(r.finished_unix);
    }
    const auto n = hsize_t(pending.size());
    append_column(kTokenIds, ids.data(), ids.size());
    append_column(kLogprobs, lps.data(), lps.size());
    const void* data[kRowColumns] = {line.data(),    cid.data(),     choice.data(), prompt.data(),
                                     start.data(),   count.data(),   reason.data(), ttft.data(),
                                     latency.data(), finished.data()};
    for (size_t c = 0; c < kRowColumns; ++c) append_column(c, data[c], n);
    rows += int64_t(n);
    tokens = at;
    pending.clear();
  }
};

H5Results::H5Results(const std::string& path, bool resume) : impl_(std::make_unique<Impl>()) {
  QuietH5 quiet;
  impl_->path = path;
  impl_->str = string_type();
  if (resume && std::filesystem::exists(path)) {
    if (impl_->open_existing(existing_)) return;
    for (auto& s : impl_->sets) s = H5Handle();
    impl_->file = H5Handle();
    existing_.clear();
    impl_->rows = impl_->tokens = 0;
    const std::string aside = path + ".broken";
    std::error_code ec;
    std::filesystem::rename(path, aside, ec);
    if (ec)
      raise(Err::OutputFile, path + " cannot be read and cannot be moved aside: " + ec.message());
    spdlog::warn(
        "{} could not be read (a run was killed while writing it); moved it to {} and "
        "started a new one",
        path, aside);
  }
  impl_->create();
}

H5Results::~H5Results() {
  try {
    flush();
  } catch (const Error& e) {
    spdlog::error("{}", e.message());
  }
}

void H5Results::append(H5Row row) {
  impl_->pending.push_back(std::move(row));
}

void H5Results::flush() {
  QuietH5 quiet;
  impl_->write_pending();
  if (H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL) < 0) impl_->fail("flush");
}

int64_t H5Results::rows() const {
  return impl_->rows + int64_t(impl_->pending.size());
}

}  // namespace qmpi
