#pragma once
// A shard of a job: one of `count` independent runs that together cover the input (input.shard,
// `tpbatch run --shard`). Shard i of n runs a contiguous range of the input's lines, the i-th of n
// near-equal ranges, and writes its own results file; `tpbatch merge` joins the parts. Contiguous
// rather than round-robin: a shard's results file keeps every row at its input line's index, and
// HDF5 allocates storage only for the chunks a shard writes, so a shard's file holds its own rows
// and not count-1 empty rows for each of them; the merge then copies each part's range in order.
#include <cstdint>
#include <map>
#include <string>

namespace tpbatch {

struct Shard {
  int64_t index = 0;
  int64_t count = 1;  // 1: the whole job, unsharded
  bool sharded() const { return count > 1; }
};

// [begin, end) of an input's lines or of a results file's rows.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// The shard that input.shard (or --shard) names: "" for none (the whole job), "INDEX/COUNT"
// (0 <= INDEX < COUNT), or "slurm" for the Slurm array task's, from `env` (the process environment
// as name -> value). Throws JobError naming `where` ("input.shard", "--shard") and the value.
Shard parse_shard(const std::string& text, const std::string& where, const std::map<std::string, std::string>& env);
// The Slurm array variables of the process environment that parse_shard reads.
std::map<std::string, std::string> slurm_array_env();

// The shard's lines of an input of `lines` lines: [lines*index/count, lines*(index+1)/count).
IndexRange lines_of_shard(const Shard& shard, int64_t lines);

// "0003-of-0016": the shard in file names (at least 4 digits, as many as count needs).
std::string shard_label(const Shard& shard);
// The results file of a shard: output.path with its `{shard}` placeholder replaced by the label, or
// else ".shard-<label>" inserted before its extension ("results.h5" -> "results.shard-0003-of-0016.h5").
// The whole job's path unchanged; JobError when an unsharded job's path has the placeholder.
std::string shard_output_path(const std::string& path, const Shard& shard);

}  // namespace tpbatch
