// LD_PRELOAD fault injection for the crash tests: counts the calls that change files under a path
// prefix (writes, syncs, truncations, renames, removals, copies, creating or truncating opens) and
// sends the process a signal at the K-th, before the call runs (or, with KILL_TORN=1 on a write,
// after writing half of it), so a test can stop a job at every such point in turn, deterministically.
//   KILL_PREFIX=/abs/path/out.h5  count calls on paths starting with it (and syncs of its folder)
//   KILL_AT=K                     the call to stop at (1-based; unset or 0: never)
//   KILL_SIGNAL=9                 the signal (default SIGKILL)
//   KILL_TORN=1                   a write at K writes half its bytes first
//   KILL_TRACE=FILE               appends "N call path" for every counted call
//   KILL_READS=1                  count reads (read, pread) of those files instead: a crash while a
//                                 file is read (KILL_SIGNAL=11 stands for a library crashing on it)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long counted;
static long kill_at = -1;
static int sig = SIGKILL, torn, reads;
static const char* prefix;
static char folder[PATH_MAX];
static int trace_fd = -1;

__attribute__((constructor)) static void init(void) {
  prefix = getenv("KILL_PREFIX");
  const char* at = getenv("KILL_AT");
  if (at && atol(at) > 0) kill_at = atol(at);
  if (getenv("KILL_SIGNAL")) sig = atoi(getenv("KILL_SIGNAL"));
  torn = getenv("KILL_TORN") && atoi(getenv("KILL_TORN"));
  reads = getenv("KILL_READS") && atoi(getenv("KILL_READS"));
  if (prefix) {
    snprintf(folder, sizeof folder, "%s", prefix);
    char* slash = strrchr(folder, '/');
    if (slash) *slash = 0;
  }
  const char* trace = getenv("KILL_TRACE");
  if (trace) trace_fd = (int)syscall(SYS_openat, AT_FDCWD, trace, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static int path_matches(const char* p, int folder_too) {
  if (!prefix || !p) return 0;
  if (strncmp(p, prefix, strlen(prefix)) == 0) return 1;
  return folder_too && strcmp(p, folder) == 0;
}

static int fd_matches(int fd, int folder_too, char* path) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, PATH_MAX - 1);
  if (n < 0) return 0;
  path[n] = 0;
  return path_matches(path, folder_too);
}

// Counts one call; returns 1 when this is the one to stop at (the caller then stops, torn or not).
static int count(const char* call, const char* path) {
  long n = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
  if (trace_fd >= 0) {
    char line[PATH_MAX + 64];
    int len = snprintf(line, sizeof line, "%ld %s %s\n", n, call, path);
    syscall(SYS_write, trace_fd, line, (size_t)len);
  }
  return n == kill_at;
}

static void stop(void) {
  kill(getpid(), sig);
  if (sig != SIGKILL) return;  // a catchable signal: the call goes on, as it would under a real signal
  for (;;) pause();
}

#define REAL(name) static __typeof__(name)* real_##name; if (!real_##name) real_##name = (__typeof__(name)*)dlsym(RTLD_NEXT, #name)

static int fd_call(int fd, const char* call, int folder_too) {
  char path[PATH_MAX];
  return !reads && fd_matches(fd, folder_too, path) && count(call, path);
}

static int read_call(int fd, const char* call) {
  char path[PATH_MAX];
  return reads && fd > 2 && fd_matches(fd, 0, path) && count(call, path);
}

ssize_t read(int fd, void* buf, size_t n) {
  REAL(read);
  if (read_call(fd, "read")) stop();
  return real_read(fd, buf, n);
}

ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  REAL(pread);
  if (read_call(fd, "pread")) stop();
  return real_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void* buf, size_t n, off_t off) {
  REAL(pread64);
  if (read_call(fd, "pread64")) stop();
  return real_pread64(fd, buf, n, off);
}

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  char path[PATH_MAX];
  if (!reads && fd > 2 && fd_matches(fd, 0, path) && count("write", path)) {
    if (torn && n > 1) real_write(fd, buf, n / 2);
    stop();
  }
  return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  REAL(pwrite);
  char path[PATH_MAX];
  if (!reads && fd_matches(fd, 0, path) && count("pwrite", path)) {
    if (torn && n > 1) real_pwrite(fd, buf, n / 2, off);
    stop();
  }
  return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  REAL(pwrite64);
  char path[PATH_MAX];
  if (!reads && fd_matches(fd, 0, path) && count("pwrite64", path)) {
    if (torn && n > 1) real_pwrite64(fd, buf, n / 2, off);
    stop();
  }
  return real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  if (fd_call(fd, "writev", 0)) stop();
  return real_writev(fd, iov, cnt);
}

int fsync(int fd) {
  REAL(fsync);
  if (fd_call(fd, "fsync", 1)) stop();
  return real_fsync(fd);
}

int fdatasync(int fd) {
  REAL(fdatasync);
  if (fd_call(fd, "fdatasync", 1)) stop();
  return real_fdatasync(fd);
}

int ftruncate(int fd, off_t len) {
  REAL(ftruncate);
  if (fd_call(fd, "ftruncate", 0)) stop();
  return real_ftruncate(fd, len);
}

ssize_t copy_file_range(int in, loff_t* in_off, int out, loff_t* out_off, size_t len, unsigned flags) {
  REAL(copy_file_range);
  if (fd_call(out, "copy_file_range", 0)) stop();
  return real_copy_file_range(in, in_off, out, out_off, len, flags);
}

int rename(const char* from, const char* to) {
  REAL(rename);
  if (!reads && (path_matches(from, 0) || path_matches(to, 0)) && count("rename", to)) stop();
  return real_rename(from, to);
}

int renameat(int a, const char* from, int b, const char* to) {
  REAL(renameat);
  if (!reads && (path_matches(from, 0) || path_matches(to, 0)) && count("renameat", to)) stop();
  return real_renameat(a, from, b, to);
}

int unlink(const char* p) {
  REAL(unlink);
  if (!reads && path_matches(p, 0) && count("unlink", p)) stop();
  return real_unlink(p);
}

static int open_counts(const char* p, int flags) { return !reads && (flags & (O_CREAT | O_TRUNC)) && path_matches(p, 0); }

int open(const char* p, int flags, ...) {
  REAL(open);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
  va_end(ap);
  if (open_counts(p, flags) && count("open", p)) stop();
  return real_open(p, flags, mode);
}

int open64(const char* p, int flags, ...) {
  REAL(open64);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
  va_end(ap);
  if (open_counts(p, flags) && count("open", p)) stop();
  return real_open64(p, flags, mode);
}

int openat(int dir, const char* p, int flags, ...) {
  REAL(openat);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
  va_end(ap);
  if (open_counts(p, flags) && count("openat", p)) stop();
  return real_openat(dir, p, flags, mode);
}
