#include "io/row_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "io/file_commit.h"
#include "reliability/model_fingerprint.h"  // fnv1a64

namespace tpbatch {
namespace {

enum RecordKind : uint32_t { kHeader = 0x4a425054, kRow = 0x52425054 };  // "TPBJ", "TPBR"
constexpr size_t kFrameBytes = sizeof(uint32_t) + 2 * sizeof(uint64_t);

uint64_t checksum(uint32_t kind, uint64_t len, const char* payload) {
  uint64_t h = fnv1a64(&kind, sizeof kind);
  h = fnv1a64(&len, sizeof len, h);
  return fnv1a64(payload, len, h);
}

std::string record(uint32_t kind, const std::string& payload) {
  const uint64_t len = payload.size(), sum = checksum(kind, len, payload.data());
  std::string out;
  out.reserve(kFrameBytes + payload.size());
  out.append(reinterpret_cast<const char*>(&kind), sizeof kind);
  out.append(reinterpret_cast<const char*>(&len), sizeof len);
  out.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  out += payload;
  return out;
}

[[noreturn]] void fail(const std::string& name, const std::string& what, int err) {
  throw Error("results file '" + name + "': " + what + ": " + std::strerror(err));
}

// Reads exactly n bytes at the current offset; false at the end of the file (or short of n).
bool read_exact(int fd, char* buf, size_t n, const std::string& path, const std::string& name) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(name, "cannot read its journal '" + path + "'", errno);
    if (r == 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

JournalContents read_journal(const std::string& path, const std::string& name, const std::string& base_wanted,
                             const std::function<void(RowResult&&)>& row) {
  JournalContents c;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return c;
    fail(name, "cannot open its journal '" + path + "'", errno);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) == 0) c.file_bytes = st.st_size;
  std::string payload;
  for (int64_t at = 0;;) {
    char frame[kFrameBytes];
    if (!read_exact(fd, frame, kFrameBytes, path, name)) break;
    uint32_t kind = 0;
    uint64_t len = 0, sum = 0;
    std::memcpy(&kind, frame, sizeof kind);
    std::memcpy(&len, frame + sizeof kind, sizeof len);
    std::memcpy(&sum, frame + sizeof kind + sizeof len, sizeof sum);
    if ((kind != kHeader && kind != kRow) || len > static_cast<uint64_t>(c.file_bytes - at)) break;
    if ((kind == kHeader) == c.has_header) break;  // one header, first
    payload.resize(len);
    if (!read_exact(fd, payload.data(), len, path, name) || checksum(kind, len, payload.data()) != sum) break;
    if (kind == kHeader) {
      c.has_header = true;
      c.base_commit = payload;
    } else {
      if (row && c.base_commit == base_wanted) {
        RowResult r;
        try {
          r = deserialize_row_result(payload);
        } catch (const Error&) {
          break;  // a record this build cannot read: the journal ends before it
        }
        row(std::move(r));
      }
      ++c.rows;
    }
    at += static_cast<int64_t>(kFrameBytes + len);
    c.valid_bytes = at;
  }
  return c;
}

RowJournal& RowJournal::operator=(RowJournal&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_, path_ = std::move(o.path_), name_ = std::move(o.name_);
    o.fd_ = -1;
  }
  return *this;
}

RowJournal::~RowJournal() {
  if (fd_ >= 0) ::close(fd_);
}

RowJournal RowJournal::start(const std::string& path, const std::string& base_commit, const std::string& name) {
  RowJournal j;
  j.path_ = path, j.name_ = name;
  j.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (j.fd_ < 0) fail(name, "cannot create its journal '" + path + "'", errno);
  j.write_all(record(kHeader, base_commit));
  if (::fdatasync(j.fd_) != 0) fail(name, "cannot write its journal '" + path + "' to the disk", errno);
  sync_folder_of(path, name);
  return j;
}

RowJournal RowJournal::resume(const std::string& path, const JournalContents& contents, const std::string& name) {
  RowJournal j;
  j.path_ = path, j.name_ = name;
  j.fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (j.fd_ < 0) fail(name, "cannot open its journal '" + path + "'", errno);
  if (contents.file_bytes != contents.valid_bytes) {  // a cut-off tail: new records go where it began
    if (::ftruncate(j.fd_, contents.valid_bytes) != 0 || ::fdatasync(j.fd_) != 0)
      fail(name, "cannot cut the journal '" + path + "' after its last whole record", errno);
  }
  if (::lseek(j.fd_, contents.valid_bytes, SEEK_SET) < 0) fail(name, "cannot seek in its journal '" + path + "'", errno);
  return j;
}

void RowJournal::write_all(const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t w = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(name_, "cannot write its journal '" + path_ + "' (disk full?)", errno);
    done += static_cast<size_t>(w);
  }
}

void RowJournal::append(const std::vector<const RowResult*>& rows) {
  if (rows.empty()) return;
  std::string bytes;
  for (const RowResult* r : rows) bytes += record(kRow, serialize(*r));
  const off_t at = ::lseek(fd_, 0, SEEK_CUR);
  try {
    write_all(bytes);
    if (::fdatasync(fd_) != 0) fail(name_, "cannot write its journal '" + path_ + "' to the disk", errno);
  } catch (const Error&) {
    // Half-written records would end the journal's valid part: cut them, so that a later append
    // (there is none after a failure today) or a resume sees only whole records.
    if (at >= 0 && ::ftruncate(fd_, at) == 0) ::lseek(fd_, at, SEEK_SET);
    throw;
  }
}

void RowJournal::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace tpbatch
