// HDF5 plumbing shared by the results file's reader and writer.
#include "io/results_hdf5.h"

#include <cstring>

namespace tpbatch::h5 {

void quiet_hdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

static herr_t walk_cb(unsigned n, const H5E_error2_t* err, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n == 0 && err && err->desc) *s = err->desc;
  return 0;
}

// The innermost message on HDF5's error stack (the most specific one), then clears the stack.
std::string h5_detail() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "HDF5 error" : s;
}

hid_t check(hid_t id, const std::string& file, const std::string& what, int exit_code) {
  if (id < 0) throw Error("results file '" + file + "': " + what + ": " + h5_detail(), exit_code);
  return id;
}

hid_t file_type(const Types& t, int d) {
  switch (d) {
    case kDone: case kGreedy: return H5T_STD_U8LE;
    case kPrompt: case kOutput: case kTopIds: return t.vi32_file;
    case kLogprobs: case kTopLogprobs: return t.vf32_file;
    case kLpSum: return H5T_IEEE_F64LE;
    default: return t.str;
  }
}

hid_t mem_type(const Types& t, int d) {
  switch (d) {
    case kDone: case kGreedy: return H5T_NATIVE_UINT8;
    case kPrompt: case kOutput: case kTopIds: return t.vi32_mem;
    case kLogprobs: case kTopLogprobs: return t.vf32_mem;
    case kLpSum: return H5T_NATIVE_DOUBLE;
    default: return t.str;
  }
}

H5Handle file_access_plist() {
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl, false, true);
#endif
  return fapl;
}

// ---- attributes ------------------------------------------------------------------------------------

void delete_attr(hid_t loc, const char* name) {
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
}

static void write_attr_raw(hid_t loc, const char* name, hid_t ftype, hid_t mtype, const void* v, const std::string& file) {
  delete_attr(loc, name);
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle a(check(H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT), file,
                   std::string("cannot create attribute '") + name + "'"),
             H5Aclose);
  check(H5Awrite(a, mtype, v), file, std::string("cannot write attribute '") + name + "'");
}

void write_attr(hid_t loc, const char* name, int64_t v, const std::string& file) {
  write_attr_raw(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, file);
}
void write_attr(hid_t loc, const char* name, double v, const std::string& file) {
  write_attr_raw(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, file);
}
void write_attr_u8(hid_t loc, const char* name, uint8_t v, const std::string& file) {
  write_attr_raw(loc, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, &v, file);
}
void write_attr(hid_t loc, const char* name, const std::string& v, const Types& t, const std::string& file) {
  const char* p = v.c_str();
  write_attr_raw(loc, name, t.str, t.str, &p, file);
}

bool has_attr(hid_t loc, const char* name) { return H5Aexists(loc, name) > 0; }

std::string read_attr_str(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  H5Handle ft(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(ft) != H5T_STRING) throw Error("results file '" + file + "': attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    H5Handle mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(ft));
    char* p = nullptr;
    check(H5Aread(a, mt, &p), file, std::string("cannot read attribute '") + name + "'");
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ft);
  std::string s(n, '\0');
  H5Handle mt(H5Tcopy(ft), H5Tclose);
  check(H5Aread(a, mt, s.data()), file, std::string("cannot read attribute '") + name + "'");
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t read_attr_int(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  int64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_INT64, &v), file, std::string("cannot read attribute '") + name + "'");
  return v;
}

double read_attr_double(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  double v = 0;
  check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), file, std::string("cannot read attribute '") + name + "'");
  return v;
}

}  // namespace tpbatch::h5
