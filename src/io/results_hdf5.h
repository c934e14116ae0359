#pragma once
// HDF5 plumbing shared by the results file's reader and writer (results_reader.h, results_file.h):
// RAII handles, errors that name the file, attributes, and the results file's datasets
// (docs/results-file.md).
#include <hdf5.h>

#include <array>
#include <cstdint>
#include <string>

#include "common/error.h"

namespace tpbatch::h5 {

void quiet_hdf5();         // no HDF5 error stack printed on stderr: errors are reported by tpbatch
std::string h5_detail();   // innermost message on HDF5's error stack; clears the stack

class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer c) : id_(id), close_(c) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_, close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~H5Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  hid_t release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Throws Error "<file>: <what>: <hdf5 detail>" when id/status is negative.
hid_t check(hid_t id, const std::string& file, const std::string& what, int exit_code = kExitFailure);

struct Types {
  H5Handle str, vi32_file, vi32_mem, vf32_file, vf32_mem;
  Types() {
    str = H5Handle(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(str, H5T_VARIABLE);
    H5Tset_cset(str, H5T_CSET_UTF8);
    vi32_file = H5Handle(H5Tvlen_create(H5T_STD_I32LE), H5Tclose);
    vi32_mem = H5Handle(H5Tvlen_create(H5T_NATIVE_INT32), H5Tclose);
    vf32_file = H5Handle(H5Tvlen_create(H5T_IEEE_F32LE), H5Tclose);
    vf32_mem = H5Handle(H5Tvlen_create(H5T_NATIVE_FLOAT), H5Tclose);
  }
};

// kTopIds / kTopLogprobs: sampling.top_logprobs; kReasoning: the job key reasoning (docs/results-file.md).
enum Ds {
  kId, kDone, kPrompt, kOutput, kText, kLogprobs, kLpSum, kGreedy, kFinish, kError, kTopIds, kTopLogprobs, kReasoning,
  kNumDs
};
inline constexpr std::array<const char*, kNumDs> kDsNames = {
    "id",          "done",      "prompt_tokens", "output_tokens",      "output_text",  "output_logprobs", "logprob_sum",
    "is_greedy",   "finish_reason", "error",     "top_logprob_tokens", "top_logprobs", "reasoning_text"};

// The format_version that added dataset d (1: every file has it). A file of an older format lacks
// it (results_reader.cpp): readers take its rows as empty, resume creates it.
inline int64_t format_adding(int d) {
  if (d == kTopIds || d == kTopLogprobs) return 2;
  if (d == kReasoning) return 3;
  return 1;
}

hid_t file_type(const Types& t, int d);
hid_t mem_type(const Types& t, int d);

// File access for the writer: HDF5's own file locking off (the writer holds its own lock on the
// path, taken before the file is touched: see output_lock.h); for readers (inspect) too, so that a
// running job's file can be read.
H5Handle file_access_plist();

void delete_attr(hid_t loc, const char* name);
bool has_attr(hid_t loc, const char* name);
void write_attr(hid_t loc, const char* name, int64_t v, const std::string& file);
void write_attr(hid_t loc, const char* name, double v, const std::string& file);
void write_attr_u8(hid_t loc, const char* name, uint8_t v, const std::string& file);
void write_attr(hid_t loc, const char* name, const std::string& v, const Types& t, const std::string& file);
std::string read_attr_str(hid_t loc, const char* name, const std::string& file);
int64_t read_attr_int(hid_t loc, const char* name, const std::string& file);
double read_attr_double(hid_t loc, const char* name, const std::string& file);

}  // namespace tpbatch::h5
