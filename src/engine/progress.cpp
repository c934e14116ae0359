#include "engine/progress.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/log.h"
#include "engine/guided_mask_time.h"

namespace tpbatch {
namespace {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

constexpr size_t kReservoirSize = 1 << 16;

}  // namespace

void Progress::Reservoir::add(double v) {
  ++seen;
  if (values.size() < kReservoirSize) {
    values.push_back(v);
    return;
  }
  // Algorithm R with a fixed-seed hash as the random source: keep v with probability size/seen.
  uint64_t h = seen * 0x9E3779B97F4A7C15ull;
  h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const uint64_t slot = h % seen;
  if (slot < kReservoirSize) values[slot] = v;
}

Progress::Progress(int64_t total_rows, int64_t already_done, double interval, std::FILE* out)
    : out_(out), tty_(isatty(fileno(out)) != 0), interval_(interval), total_(total_rows), done_(already_done),
      skipped_(already_done), start_(std::chrono::steady_clock::now()), last_print_(start_) {}

void Progress::row_done(const RowResult& row, double ttft, double tpot) {
  ++done_;
  if (row.finish_reason == FinishReason::kError) ++errors_;
  prompt_tokens_ += static_cast<int64_t>(row.prompt_tokens.size());
  prompt_tokens_cached_ += row.prompt_tokens_cached;
  output_tokens_ += static_cast<int64_t>(row.output_tokens.size());
  if (ttft > 0) ttft_.add(ttft);
  if (tpot > 0) tpot_.add(tpot);
}

void Progress::maybe_print() {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (since < (tty_ ? 0.5 : interval_)) return;
  last_print_ = now;
  print_line(false);
}

void Progress::print_line(bool final_line) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = t > 0 ? (done_ - skipped_) / t : 0.0;
  const double eta = rate > 0 ? (total_ - done_) / rate : 0.0;
  char body[320];
  std::snprintf(body, sizeof body,
                "[tpbatch] rows %lld/%lld (%.1f%%)  errors %lld  in %.0f tok/s  out %.0f tok/s  elapsed %.0fs  ETA %.0fs",
                static_cast<long long>(done_), static_cast<long long>(total_), total_ ? 100.0 * done_ / total_ : 100.0,
                static_cast<long long>(errors_), t > 0 ? prompt_tokens_ / t : 0.0, t > 0 ? output_tokens_ / t : 0.0, t,
                eta);
  // On a terminal the line rewrites itself ("\r", then "erase to the end of the line").
  write((tty_ ? "\r" : "") + log_prefix() + body + ((tty_ && !final_line) ? "\033[K" : "\n"));
}

void Progress::write(const std::string& text) {
  if (out_ == stderr) {
    log_raw(text);
  } else {
    std::fputs(text.c_str(), out_);
    std::fflush(out_);
  }
}

void Progress::print_final() {
  print_line(true);
  const RunMetrics m = metrics();
  char line[512];
  std::snprintf(line, sizeof line,
                "[tpbatch] done: %lld rows (%lld errors) in %.2fs; %lld prompt + %lld output tokens; %.1f output tok/s, "
                "%.1f total tok/s; TTFT p50 %.3fs p99 %.3fs; TPOT p50 %.4fs p99 %.4fs\n",
                static_cast<long long>(done_ - skipped_), static_cast<long long>(errors_), m.wall_seconds,
                static_cast<long long>(prompt_tokens_), static_cast<long long>(output_tokens_),
                m.output_tokens_per_second, m.total_tokens_per_second, m.ttft_p50, m.ttft_p99, m.tpot_p50, m.tpot_p99);
  write(log_prefix() + line);
  std::snprintf(line, sizeof line, "[tpbatch] prompt tokens: %lld computed, %lld cached (prefix cache)\n",
                static_cast<long long>(prompt_tokens_ - prompt_tokens_cached_), static_cast<long long>(prompt_tokens_cached_));
  write(log_prefix() + line);
  if (const std::string guided = guided_mask_time_line(); !guided.empty()) write(log_prefix() + guided);
}

RunMetrics Progress::metrics() const {
  RunMetrics m;
  m.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  m.prompt_tokens = prompt_tokens_;
  m.prompt_tokens_cached = prompt_tokens_cached_;
  m.output_tokens = output_tokens_;
  m.output_tokens_per_second = m.wall_seconds > 0 ? output_tokens_ / m.wall_seconds : 0.0;
  m.total_tokens_per_second = m.wall_seconds > 0 ? (prompt_tokens_ + output_tokens_) / m.wall_seconds : 0.0;
  m.ttft_p50 = percentile(ttft_.values, 0.5);
  m.ttft_p90 = percentile(ttft_.values, 0.9);
  m.ttft_p99 = percentile(ttft_.values, 0.99);
  m.tpot_p50 = percentile(tpot_.values, 0.5);
  m.tpot_p90 = percentile(tpot_.values, 0.9);
  m.tpot_p99 = percentile(tpot_.values, 0.99);
  return m;
}

}  // namespace tpbatch
