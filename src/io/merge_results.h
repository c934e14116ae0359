#pragma once
// `tpbatch merge OUT.h5 PARTS.h5...`: the results files of a sharded job's shards (input.shard)
// joined into one results file, as the whole job unsharded would have written it: every row at its
// input line's index, the job's attributes (job_yaml, model, fingerprints) with no shard, /metrics
// summed over the parts (runs, wall seconds, tokens), complete.
//
// Checked before OUT is touched, each failure exit 2 naming the part file: every part is a shard's
// results file of one job (what resume compares: job_yaml less engine/parallel/output settings, the
// model's, the input's and the chat template's fingerprints, the task, the row count), the shards
// are INDEX 0..COUNT-1 of one COUNT with none missing or given twice, and each part has every row of
// its shard done. OUT must not be a part, nor exist unless `force`. OUT is written beside itself
// (`OUT.partial`, under the output lock a job takes) and renamed over OUT once closed and synced;
// the rows stream through in chunks, so memory stays bounded whatever the job's size. The merged
// file takes the first part's `job_id` attribute, when the parts have one.
#include <ostream>
#include <string>
#include <vector>

namespace tpbatch {

struct MergeOptions {
  std::string output;
  std::vector<std::string> parts;
  bool force = false;  // replace an existing OUT (never a part)
};

int merge_results(const MergeOptions& o, std::ostream& out);

}  // namespace tpbatch
