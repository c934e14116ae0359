#pragma once
// `tpbatch plan`'s recommended layouts, decided in this one place from the memory ledger and the
// speed prediction of every layout (plan/speed_report.h):
//   throughput  the layout that fits with the most predicted output tokens/s in total (all
//               replicas), as the speed table ranks them; on an exact tie the earlier in the
//               table (smaller TP, then smaller PP). The KV headroom counts through the
//               prediction: each layout is predicted at the rows its replicas can hold (up to
//               max_seqs), so a layout short of memory for a full batch is predicted slower.
//   latency     the largest TP (within a node) that fits, then the smallest PP: the shortest
//               weight stream per rank per token, whatever the batch.
#include "plan/memory_ledger.h"
#include "plan/speed_report.h"

namespace tpbatch {

// Sets plan.throughput, plan.throughput_tokens_per_s and plan.latency (empty when nothing fits).
void recommend_layouts(Plan& plan, const SpeedReport& speed);

}  // namespace tpbatch
