// The CUDA backend's step: begin_step() packs the step's ids, positions, per-row attention
// table, block tables, tile index and logit requests into one pinned buffer and sends it with one
// copy; paged_attention() reads those tables on the device.
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"

namespace tpbatch {
namespace {

// 16-byte aligned offsets (in int32 elements) of the sections of the step buffer.
size_t align4(size_t ints) { return (ints + 3) / 4 * 4; }

// Where each section of the step buffer starts, in int32 elements.
struct StepLayout {
  size_t rows = 0, num_seqs = 0, num_logit = 0;
  bool rope_tables = false;
  size_t tokens = 0, positions = 0, rope_table_ids = 0, attn = 0, tables = 0, row_begin = 0, num_rows = 0,
         tile_prefix = 0, logit_rows = 0, targets = 0, total = 0;
  size_t bytes() const { return total * sizeof(int32_t); }
};

// The step's rows, and the block-table entries of all its sequences; throws naming what is off.
size_t checked_table_ints(const StepBatch& step, size_t rows) {
  size_t table_ints = 0;
  for (const AttentionSeq& s : step.seqs) {
    if (s.row_begin < 0 || s.num_rows < 0 || static_cast<size_t>(s.row_begin + s.num_rows) > rows)
      throw Error("CUDA backend: begin_step: sequence rows [" + std::to_string(s.row_begin) + ", " +
                  std::to_string(s.row_begin + s.num_rows) + ") outside the step's " + std::to_string(rows) + " rows");
    table_ints += static_cast<size_t>(s.num_blocks);
  }
  if (!step.rope_tables.empty() && step.rope_tables.size() != rows)
    throw Error("CUDA backend: begin_step: " + std::to_string(step.rope_tables.size()) + " rope tables for " +
                std::to_string(rows) + " rows");
  for (int64_t r : step.logit_rows)
    if (r < 0 || static_cast<size_t>(r) >= rows)
      throw Error("CUDA backend: begin_step: logit row " + std::to_string(r) + " outside the step's " +
                  std::to_string(rows) + " rows");
  return table_ints;
}

StepLayout step_layout(const StepBatch& step) {
  StepLayout l;
  l.rows = std::max(step.tokens.size(), step.positions.size());
  l.num_seqs = step.seqs.size();
  l.num_logit = step.logit_rows.size();
  l.rope_tables = !step.rope_tables.empty();
  const size_t table_ints = checked_table_ints(step, l.rows);
  l.tokens = 0;
  l.positions = l.tokens + align4(l.rows);
  l.rope_table_ids = l.positions + align4(l.rows);
  l.attn = l.rope_table_ids + (l.rope_tables ? align4(l.rows) : 0);
  l.tables = l.attn + align4(3 * l.rows);
  l.row_begin = l.tables + align4(std::max<size_t>(table_ints, 1));
  l.num_rows = l.row_begin + align4(l.num_seqs);
  l.tile_prefix = l.num_rows + align4(l.num_seqs);
  l.logit_rows = l.tile_prefix + align4(kernels::kTileShapes * (l.num_seqs + 1));
  l.targets = l.logit_rows + align4(l.num_logit);
  l.total = l.targets + align4(l.num_logit);
  return l;
}

// The per-row attention entries, the concatenated block tables, each sequence's rows and, per
// tile shape, the tiles before each sequence (their totals into tiles_by_shape).
void pack_attention(const StepBatch& step, const StepLayout& l, int32_t* h, int64_t* tiles_by_shape) {
  auto* attn = reinterpret_cast<kernels::AttentionRow*>(h + l.attn);
  for (size_t r = 0; r < l.rows; ++r) attn[r] = {-1, 0, 0};
  int32_t table_off = 0;
  for (int s = 0; s < kernels::kTileShapes; ++s) {
    h[l.tile_prefix + s * (l.num_seqs + 1)] = 0;
    tiles_by_shape[s] = 0;
  }
  for (size_t si = 0; si < l.num_seqs; ++si) {
    const AttentionSeq& s = step.seqs[si];
    std::copy(s.blocks, s.blocks + s.num_blocks, h + l.tables + table_off);
    for (int64_t r = 0; r < s.num_rows; ++r)
      attn[s.row_begin + r] = {static_cast<int32_t>(s.pos_begin + r), table_off, static_cast<int32_t>(s.num_blocks)};
    table_off += static_cast<int32_t>(s.num_blocks);
    h[l.row_begin + si] = static_cast<int32_t>(s.row_begin);
    h[l.num_rows + si] = static_cast<int32_t>(s.num_rows);
    for (int shape = 0; shape < kernels::kTileShapes; ++shape) {
      const int64_t per_tile = int64_t(1) << shape;
      tiles_by_shape[shape] += (s.num_rows + per_tile - 1) / per_tile;
      h[l.tile_prefix + shape * (l.num_seqs + 1) + si + 1] = static_cast<int32_t>(tiles_by_shape[shape]);
    }
  }
}

// The whole step buffer, zeroed first (the alignment gaps included).
void pack_step(const StepBatch& step, const StepLayout& l, int32_t* h, int64_t* tiles_by_shape) {
  std::memset(h, 0, l.bytes());
  for (size_t r = 0; r < step.tokens.size(); ++r) h[l.tokens + r] = step.tokens[r];
  for (size_t r = 0; r < step.positions.size(); ++r) h[l.positions + r] = step.positions[r];
  for (size_t r = 0; r < step.rope_tables.size(); ++r) h[l.rope_table_ids + r] = step.rope_tables[r];
  pack_attention(step, l, h, tiles_by_shape);
  for (size_t j = 0; j < l.num_logit; ++j) {
    h[l.logit_rows + j] = static_cast<int32_t>(step.logit_rows[j]);
    h[l.targets + j] = j < step.logit_targets.size() ? step.logit_targets[j] : -1;
  }
}

// The kernels' view of the step buffer at d on the device.
kernels::StepView device_step_view(const StepLayout& l, const int32_t* d) {
  kernels::StepView v;
  v.rows = static_cast<int64_t>(l.rows);
  v.num_seqs = static_cast<int64_t>(l.num_seqs);
  v.num_logit_rows = static_cast<int64_t>(l.num_logit);
  v.tokens = d + l.tokens;
  v.positions = d + l.positions;
  v.rope_tables = l.rope_tables ? d + l.rope_table_ids : nullptr;
  v.attn_rows = reinterpret_cast<const kernels::AttentionRow*>(d + l.attn);
  v.tables = d + l.tables;
  v.seq_row_begin = d + l.row_begin;
  v.seq_num_rows = d + l.num_rows;
  v.tile_prefix = d + l.tile_prefix;
  v.logit_rows = d + l.logit_rows;
  v.logit_targets = d + l.targets;
  return v;
}

}  // namespace

void CudaBackend::begin_step(const StepBatch& step) {
  const StepLayout layout = step_layout(step);
  const size_t bytes = layout.bytes();
  // The pinned buffer of two steps ago may still be in its copy: wait for that copy only.
  const int i = step_parity_;
  step_parity_ ^= 1;
  wait_event(step_copied_[i], "CUDA begin_step");
  ensure_pinned(step_pinned_[i], step_pinned_cap_[i], bytes);
  auto* h = static_cast<int32_t*>(step_pinned_[i]);
  pack_step(step, layout, h, tiles_by_shape_);
  step_seqs_.assign(step.seqs.begin(), step.seqs.end());
  for (AttentionSeq& s : step_seqs_) s.blocks = nullptr;  // the caller's memory: not kept

  auto* d = static_cast<int32_t*>(scratch(step_device_, bytes, "CUDA begin_step"));
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
  TPBATCH_CUDA_CHECK(cudaEventRecord(step_copied_[i], stream_));
  step_ = device_step_view(layout, d);
}

void CudaBackend::paged_attention(BufferView q, int64_t q_stride, BufferView k, BufferView v, int64_t kv_stride,
                                  BufferView k_cache, BufferView v_cache, const KvLayout& kv, int64_t q_heads,
                                  BufferView out) {
  if (kv.kv_heads <= 0 || q_heads % kv.kv_heads != 0)
    throw Error("CUDA backend: paged_attention: " + std::to_string(q_heads) + " q heads are not a multiple of " +
                std::to_string(kv.kv_heads) + " kv heads");
  int64_t max_span = 0;
  for (const AttentionSeq& s : step_seqs_) {
    if (s.num_rows == 0) continue;
    const int64_t end = s.pos_begin + s.num_rows;  // positions 0..end-1 are visible to the last row
    if ((end - 1) / kv.block_size >= s.num_blocks)
      throw Error("CUDA backend: paged_attention: a sequence reaching position " + std::to_string(end - 1) +
                  " has only " + std::to_string(s.num_blocks) + " KV blocks of " + std::to_string(kv.block_size));
    const int64_t span = kv.window > 0 ? std::min(end, kv.window + kernels::kMaxTileQueries) : end;
    max_span = std::max(max_span, span);
  }
  kernels::kv_append(k, v, kv_stride, k_cache, v_cache, kv, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("kv_append");
  const kernels::AttentionGrid grid =
      kernels::attention_grid(q_heads / kv.kv_heads, kv.kv_heads, tiles_by_shape_, max_span, sms_);
  const size_t floats = kernels::attention_scratch_floats(step_.rows, q_heads, kv.head_dim, grid.splits);
  float* part = floats ? static_cast<float*>(scratch(attention_scratch_, floats * sizeof(float), "CUDA attention"))
                       : nullptr;
  kernels::paged_attention(q, q_stride, k_cache, v_cache, kv, q_heads, out, grid, part, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("paged_attention");
}

}  // namespace tpbatch
