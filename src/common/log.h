#pragma once
// Every line tpbatch writes to standard error goes through here, so they all read alike:
//   2026-12-02T14:31:07Z [rank 0] [tpbatch] KV cache: ...
//   2026-12-02T14:31:07Z [rank 0] [tpbatch] warning: ...
//   2026-12-02T14:31:07Z [rank 0] tpbatch: error: ...
// The time is UTC to the second; "[rank N] " only in a process that called set_log_rank (a run's
// ranks), so a command without MPI (export, inspect) writes "TIME [tpbatch] ...". Each line goes
// out in one write, so the lines of ranks sharing a terminal or a log file do not interleave.
#include <cstdio>
#include <string>

namespace tpbatch {

void set_log_rank(int world_rank);

// "2026-12-02T14:31:07Z [rank 0] ": what every line starts with.
std::string log_prefix();

// `text` written as it is, in one write: for the progress line on a terminal, which starts with
// "\r" and log_prefix() and rewrites itself.
void log_raw(const std::string& text);

// printf-style, one line each (the newline is added): log_prefix(), then "[tpbatch] ",
// "[tpbatch] warning: ", "tpbatch: error: " or nothing (log_plain) before the text.
void log_plain(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace tpbatch
