#pragma once
// Replacing a file so that a crash at any instant leaves either the old file or the new one, never a
// mix: the new file is written beside the old one, synced, renamed over it (rename(2) is atomic), and
// the folder is synced so the new name survives a power loss too. Also a plain copy for starting a
// new working file from a committed one.
#include <string>

namespace tpbatch {

// fsync(2) of the file at `path`; throws Error "results file '<name>': ..." naming why.
void sync_file(const std::string& path, const std::string& name);
// fsync(2) of the folder holding `path` (a rename or a new file in it reaches the disk).
void sync_folder_of(const std::string& path, const std::string& name);
// sync_file(from), rename(from, to), sync_folder_of(to).
void commit_by_rename(const std::string& from, const std::string& to, const std::string& name);
// `to` becomes a byte copy of `from` (created or truncated; not synced: a working file).
void copy_file(const std::string& from, const std::string& to, const std::string& name);

}  // namespace tpbatch
