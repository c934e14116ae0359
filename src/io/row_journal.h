#pragma once
// The row journal: an append-only file of checksummed records beside the results file
// (`<results>.journal`), the durable record of the rows a run has finished since the results file was
// last committed (result_writer.h). A row counts as done once its record is synced to the disk.
//
// Format: a header record naming the commit it extends (the results file's `commit_id`), then one
// record per row. A record is a kind (u32), a payload length (u64), a checksum (FNV-1a 64 over kind,
// length and payload) and the payload (the header: the commit id; a row: row_result.h's bytes). A
// kill or a power loss can only cut or garble the records written after the last sync, all at the
// end: reading stops at the first record that is short or fails its checksum, and the journal
// continues from there.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/row_result.h"

namespace tpbatch {

struct JournalContents {
  bool has_header = false;
  std::string base_commit;   // the commit the rows extend
  int64_t rows = 0;          // valid row records
  int64_t valid_bytes = 0;   // up to the end of the last valid record
  int64_t file_bytes = 0;    // the journal's size (more than valid_bytes: a cut-off tail)
};

// Reads the journal at `path`. When its header names `base_wanted`, every valid row record goes to
// `row`, in file order; otherwise (another commit's journal, or none) rows are only counted. An
// absent or empty journal has no header. Throws Error naming `name` when it cannot be read.
JournalContents read_journal(const std::string& path, const std::string& name, const std::string& base_wanted = "",
                             const std::function<void(RowResult&&)>& row = nullptr);

class RowJournal {
 public:
  // A new journal extending `base_commit`: whatever `path` held is replaced (truncated, header
  // written and synced, the folder synced).
  static RowJournal start(const std::string& path, const std::string& base_commit, const std::string& name);
  // Continues an existing journal after its valid records (a cut-off tail is cut away first).
  static RowJournal resume(const std::string& path, const JournalContents& contents, const std::string& name);

  RowJournal() = default;
  RowJournal(RowJournal&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)), name_(std::move(o.name_)) { o.fd_ = -1; }
  RowJournal& operator=(RowJournal&& o) noexcept;
  RowJournal(const RowJournal&) = delete;
  RowJournal& operator=(const RowJournal&) = delete;
  ~RowJournal();

  // Appends one record per row and syncs: when it returns, the rows survive a kill or power loss.
  // Throws Error naming the results file (a full disk: the rows are not recorded).
  void append(const std::vector<const RowResult*>& rows);
  void close();

 private:
  void write_all(const std::string& bytes);
  int fd_ = -1;
  std::string path_, name_;
};

}  // namespace tpbatch
