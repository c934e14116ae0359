#pragma once
// What the parts of input-line parsing share: the line being read (its index and id, for the
// BadLine that refuses it) and JSON integers read as int64.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "io/input_row.h"

namespace tpbatch {

struct LineContext {
  int64_t index;
  std::string id;
  [[noreturn]] void bad(const std::string& reason) const {
    throw BadLine{index, id, "input line " + std::to_string(index + 1) + ": " + reason};
  }
};

// A JSON integer as int64; false if not an integer or out of int64 range.
bool json_as_int64(const nlohmann::json& v, int64_t& out);

}  // namespace tpbatch
