#pragma once
// The job-key reference as Markdown (docs/job-keys.md), written from the key table (job_keys.h):
// `tpbatch job-keys` prints it, and a test holds the committed page to it.
#include <string>

namespace tpbatch {

std::string job_keys_markdown();

}  // namespace tpbatch
