#pragma once
// Python's str and sequence semantics that jinja2 templates rely on, by code point: the renderer's
// string methods and filters, and slicing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/value.h"

namespace tpbatch::chat {

// The tokenizer's decoder; a byte that starts no valid sequence stands for itself (as Latin-1).
std::vector<uint32_t> code_points(const std::string& s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t from = 0, size_t to = SIZE_MAX);
// Python's str.isspace().
bool py_space(uint32_t c);
// str.strip / lstrip / rstrip with optional characters (None: whitespace).
std::string py_strip(const std::string& s, bool left, bool right, const Value* chars);
std::string py_case(const std::string& s, int mode);  // 0 lower, 1 upper, 2 capitalize, 3 title

double as_double(const Value& v);
inline bool is_int_like(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }
inline int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? (v.b ? 1 : 0) : v.i; }

// Python slice indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value* start, const Value* stop, const Value* step,
                                  const SourcePos& p);

}  // namespace tpbatch::chat
