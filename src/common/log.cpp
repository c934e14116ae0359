#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <ctime>
#include <vector>

namespace tpbatch {
namespace {

std::atomic<int> g_rank{-1};

std::string vformat(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::vector<char> buf(static_cast<size_t>(n) + 1);
  std::vsnprintf(buf.data(), buf.size(), fmt, args);
  return std::string(buf.data(), static_cast<size_t>(n));
}

// One write(2) per line: stdio's buffer may split a long line between two writes.
void write_line(const std::string& line) {
  std::fflush(stderr);  // anything written through stdio first stays first
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t w = ::write(2, p, left);
    if (w <= 0) return;
    p += w;
    left -= static_cast<size_t>(w);
  }
}

void emit(const char* tag, const char* fmt, va_list args) {
  write_line(log_prefix() + tag + vformat(fmt, args) + "\n");
}

}  // namespace

void set_log_rank(int world_rank) { g_rank.store(world_rank); }

std::string log_prefix() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string out = stamp;
  const int rank = g_rank.load();
  if (rank >= 0) out += " [rank " + std::to_string(rank) + "]";
  return out + " ";
}

void log_raw(const std::string& text) { write_line(text); }

void log_plain(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  emit("", fmt, args);
  va_end(args);
}

void log_info(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  emit("[tpbatch] ", fmt, args);
  va_end(args);
}

void log_warning(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  emit("[tpbatch] warning: ", fmt, args);
  va_end(args);
}

void log_error(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  emit("tpbatch: error: ", fmt, args);
  va_end(args);
}

}  // namespace tpbatch
