#pragma once
// An input line's sampling overrides: each per-line key of the sampling table (job/sampling_keys.h)
// that the line sets, checked by its kind and bounds and put in the field its job key fills.
#include <nlohmann/json.hpp>

#include "io/line_context.h"
#include "job/sampling_params.h"

namespace tpbatch {

// Applies the overrides `line` (a JSON object) carries to `params` (the job's, as a default), in
// table order; refuses the line (ctx.bad) at the first bad value, naming its key.
void apply_line_sampling(const nlohmann::json& line, const LineContext& ctx, SamplingParams& params);

}  // namespace tpbatch
