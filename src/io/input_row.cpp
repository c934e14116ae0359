// JSONL input: streaming reader, row counting and per-line parsing. See CONTRACT.md "Job file".
#include "io/input_row.h"

#include <cstdio>
#include <fstream>
#include <vector>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpbatch {
namespace {

using json = nlohmann::json;

bool valid_utf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += len;
  }
  return true;
}

struct LineContext {
  int64_t index;
  std::string id;
  [[noreturn]] void bad(const std::string& reason) const {
    throw BadLine{index, id, "input line " + std::to_string(index + 1) + ": " + reason};
  }
};

std::string json_error_detail(const std::string& what) {
  std::string d = what;
  auto br = d.find("] ");
  if (d.rfind("[json.exception", 0) == 0 && br != std::string::npos) d = d.substr(br + 2);
  const std::string prefix = "parse error at line 1, ";
  if (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  if (d.size() > 200) d = d.substr(0, 197) + "...";
  return d;
}

// A JSON integer as int64; false if not an integer or out of int64 range.
bool as_int64(const json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  return false;
}

void apply_overrides(const json& obj, const LineContext& ctx, SamplingParams& s) {
  auto field = [&](const char* name) -> const json* {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  };
  if (const json* v = field("max_new_tokens")) {
    int64_t x;
    if (!as_int64(*v, x) || x < 0) ctx.bad("'max_new_tokens' must be an integer >= 0");
    s.max_new_tokens = x;
  }
  if (const json* v = field("temperature")) {
    if (!v->is_number()) ctx.bad("'temperature' must be a number");
    double x = v->get<double>();
    if (!(x >= 0)) ctx.bad("'temperature' must be >= 0");
    s.temperature = x;
  }
  if (const json* v = field("top_k")) {
    int64_t x;
    if (!as_int64(*v, x) || x < 0) ctx.bad("'top_k' must be an integer >= 0");
    s.top_k = x;
  }
  if (const json* v = field("top_p")) {
    if (!v->is_number()) ctx.bad("'top_p' must be a number");
    double x = v->get<double>();
    if (!(x > 0 && x <= 1)) ctx.bad("'top_p' must be in (0, 1]");
    s.top_p = x;
  }
  if (const json* v = field("seed")) {
    if (!v->is_number_unsigned()) ctx.bad("'seed' must be a non-negative integer");
    s.seed = v->get<uint64_t>();
  }
  if (const json* v = field("stop")) {
    std::vector<std::string> stop;
    const std::string msg = "'stop' must be a string or a list of non-empty strings";
    if (v->is_string()) {
      stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const auto& e : *v) {
        if (!e.is_string()) ctx.bad(msg);
        stop.push_back(e.get<std::string>());
      }
    } else {
      ctx.bad(msg);
    }
    for (const auto& st : stop)
      if (st.empty()) ctx.bad(msg);
    s.stop = std::move(stop);
  }
  if (const json* v = field("ignore_eos")) {
    if (!v->is_boolean()) ctx.bad("'ignore_eos' must be true or false");
    s.ignore_eos = v->get<bool>();
  }
}

}  // namespace

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

namespace {

// The source text of the top-level number under `key` (the last one, as the parser keeps the last
// of duplicated keys): the parser turns integers beyond 2^64 and decimals into doubles, whose dump
// is not what the input says.
std::string number_as_written(std::string_view line, const std::string& key) {
  struct Sax : json::json_sax_t {
    const std::string& wanted;
    int depth = 0;
    bool at_key = false;
    std::string text;
    explicit Sax(const std::string& k) : wanted(k) {}
    bool value() { at_key = false; return true; }
    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t& s) override {
      if (at_key) text = s;
      return value();
    }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { ++depth; return value(); }
    bool key(string_t& k) override { at_key = depth == 1 && k == wanted; return true; }
    bool end_object() override { --depth; return value(); }
    bool start_array(std::size_t) override { ++depth; return value(); }
    bool end_array() override { --depth; return value(); }
    bool parse_error(std::size_t, const std::string&, const json::exception&) override { return false; }
  } sax(key);
  json::sax_parse(line.begin(), line.end(), &sax);
  return sax.text;
}

}  // namespace

InputRow parse_input_row(std::string_view line, int64_t index, const JobSpec& job, int64_t vocab_size) {
  LineContext ctx{index, std::to_string(index)};
  if (is_blank_line(line)) ctx.bad("empty line");
  if (!valid_utf8(line)) ctx.bad("invalid UTF-8");
  json obj;
  try {
    obj = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    ctx.bad("not valid JSON (" + json_error_detail(e.what()) + ")");
  }
  if (!obj.is_object()) ctx.bad("not a JSON object");

  InputRow row;
  row.index = index;
  row.id = ctx.id;
  const InputSpec& in = job.input;
  if (auto it = obj.find(in.id_field); it != obj.end() && !it->is_null()) {
    if (it->is_string()) {
      row.id = it->get<std::string>();
      if (row.id.find('\0') != std::string::npos)  // ids are stored as C strings: it would be cut
        ctx.bad("'" + in.id_field + "' contains a NUL character (\\u0000), which the results file cannot store");
    } else if (it->is_number_float()) {
      row.id = number_as_written(line, in.id_field);  // 1.50, 1e3, 2^64 and beyond: as in the input
    } else if (it->is_number()) {
      row.id = it->dump();
    } else {
      ctx.bad("'" + in.id_field + "' must be a string or a number");
    }
    ctx.id = row.id;
  }

  auto text_it = obj.find(in.text_field);
  if (in.tokens_field) {
    const std::string& tf = *in.tokens_field;
    auto it = obj.find(tf);
    if (it == obj.end()) ctx.bad("field '" + tf + "' is missing");
    if (!it->is_array()) ctx.bad("'" + tf + "' must be a list of token ids");
    if (it->empty()) ctx.bad("'" + tf + "' is empty");
    std::vector<int32_t> tokens;
    tokens.reserve(it->size());
    for (const auto& t : *it) {
      int64_t id;
      if (!as_int64(t, id)) {
        if (t.is_number_integer()) ctx.bad("token id " + t.dump() + " out of range [0, " + std::to_string(vocab_size) + ")");
        ctx.bad("'" + tf + "' must be a list of integer token ids, got " + t.dump());
      }
      bool out = id < 0 || id > std::numeric_limits<int32_t>::max() || (vocab_size > 0 && id >= vocab_size);
      if (out) {
        std::string range = vocab_size > 0 ? "[0, " + std::to_string(vocab_size) + ")" : "[0, 2^31)";
        ctx.bad("token id " + std::to_string(id) + " out of range " + range);
      }
      tokens.push_back(static_cast<int32_t>(id));
    }
    row.tokens = std::move(tokens);
    if (text_it != obj.end() && text_it->is_string()) row.text = text_it->get<std::string>();
  } else {
    if (text_it == obj.end()) ctx.bad("field '" + in.text_field + "' is missing");
    if (!text_it->is_string()) ctx.bad("'" + in.text_field + "' must be a string");
    row.text = text_it->get<std::string>();
  }

  if (job.task == "score") {
    if (auto it = obj.find(in.completion_field); it != obj.end() && !it->is_null()) {
      if (!it->is_string()) ctx.bad("'" + in.completion_field + "' must be a string");
      row.completion = it->get<std::string>();
    }
  }

  row.sampling = job.sampling;
  apply_overrides(obj, ctx, row.sampling);
  return row;
}

JsonlReader::JsonlReader(const std::string& path) : in_(path, std::ios::binary), path_(path) {
  if (!in_) throw JobError("input file '" + path + "' cannot be opened");
}

bool JsonlReader::read_physical(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) throw Error("input file '" + path_ + "': read error after line " + std::to_string(physical_));
    return false;
  }
  if (physical_ == 0 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++physical_;
  return true;
}

bool JsonlReader::next(std::string& line) {
  if (queue_.empty()) {
    if (!read_physical(line)) return false;
    if (!is_blank_line(line)) {
      ++lines_;
      return true;
    }
    // A blank line: a row only if a non-blank line follows.
    queue_.push_back(std::move(line));
    std::string more;
    for (;;) {
      if (!read_physical(more)) {
        queue_.clear();
        return false;
      }
      bool blank = is_blank_line(more);
      queue_.push_back(std::move(more));
      if (!blank) break;
    }
  }
  line = std::move(queue_.front());
  queue_.pop_front();
  ++lines_;
  return true;
}

int64_t count_jsonl_rows(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw JobError("input file '" + path + "' cannot be opened");
  std::vector<char> buf(1 << 20);
  int64_t line_no = 0, last_nonblank = 0;
  bool blank = true, has_chars = false, first = true;
  for (;;) {
    size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    if (n == 0) break;
    size_t i = 0;
    if (first) {
      first = false;
      if (n >= 3 && buf[0] == '\xEF' && buf[1] == '\xBB' && buf[2] == '\xBF') i = 3, has_chars = true;
    }
    for (; i < n; ++i) {
      char c = buf[i];
      if (c == '\n') {
        ++line_no;
        if (!blank) last_nonblank = line_no;
        blank = true;
        has_chars = false;
      } else {
        has_chars = true;
        if (c != ' ' && c != '\t' && c != '\r') blank = false;
      }
    }
  }
  if (std::ferror(f.get())) throw Error("input file '" + path + "': read error");
  if (has_chars) {
    ++line_no;
    if (!blank) last_nonblank = line_no;
  }
  return last_nonblank;
}

std::string input_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("input file '" + path + "' cannot be read");
  uint64_t hash = 0xcbf29ce484222325ull, bytes = 0;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) hash = (hash ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
    bytes += static_cast<uint64_t>(n);
  }
  char out[64];
  std::snprintf(out, sizeof out, "%llu:%016llx", static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(hash));
  return out;
}

}  // namespace tpbatch
