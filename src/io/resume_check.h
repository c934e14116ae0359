#pragma once
// What may differ between a results file and the job that resumes it. The job's settings that shape
// results (model, task, sampling, input fields, chat template...) must be equal; engine and layout
// settings may change. The model itself is compared by fingerprint (model_fingerprint.h).
#include <string>

namespace tpbatch {

// "" when the two job YAML texts are equivalent for resume, else what differs ("'sampling.seed' is
// 1 there and 2 here").
std::string job_yaml_difference(const std::string& there, const std::string& here);

}  // namespace tpbatch
