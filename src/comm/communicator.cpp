#include "comm/communicator.h"

#include "backend/dtype.h"
#include "common/error.h"

namespace tpbatch {

template <class Call>
void Communicator::counted(const char* op, size_t bytes, Call call) {
  CollectiveStats& s = stats_[op];
  s.calls++;
  s.bytes += static_cast<int64_t>(bytes);
  start_timing();
  call();
  stop_timing(op);
}

void Communicator::allreduce_sum(BufferView data, size_t count) {
  counted("allreduce", count * dtype_size(data.dtype), [&] { run_allreduce_sum(data, count); });
}

void Communicator::allreduce_max(BufferView data, size_t count) {
  if (data.dtype != DType::F32)
    throw Error(std::string("allreduce max of ") + dtype_name(data.dtype) + " elements is not supported (F32 only)");
  counted("allreduce max", count * sizeof(float), [&] { run_allreduce_max(data, count); });
}

void Communicator::allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  counted("allgather", bytes_per_rank * static_cast<size_t>(size()),
          [&] { run_allgather(send, recv, bytes_per_rank); });
}

void Communicator::send(BufferView data, size_t bytes, int peer) {
  counted("send", bytes, [&] { run_send(data, bytes, peer); });
}

void Communicator::recv(BufferView data, size_t bytes, int peer) {
  counted("recv", bytes, [&] { run_recv(data, bytes, peer); });
}

const std::map<std::string, CollectiveStats>& Communicator::stats() {
  settle_timings();
  return stats_;
}

void Communicator::reset_stats() {
  settle_timings();
  stats_.clear();
}

void Communicator::start_timing() { started_ = std::chrono::steady_clock::now(); }

void Communicator::stop_timing(const std::string& op) {
  add_seconds(op, std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
}

}  // namespace tpbatch
