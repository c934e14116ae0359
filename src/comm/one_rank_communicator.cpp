#include "comm/one_rank_communicator.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"

namespace tpbatch {

void OneRankCommunicator::run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  std::vector<char> tmp(bytes_per_rank);
  be_.host_access(send, bytes_per_rank, false, [&](void* p) { std::memcpy(tmp.data(), p, bytes_per_rank); });
  be_.host_access(recv, bytes_per_rank, true, [&](void* p) { std::memcpy(p, tmp.data(), bytes_per_rank); });
}

void OneRankCommunicator::run_send(BufferView, size_t, int peer) {
  throw Error("send to rank " + std::to_string(peer) + " in a TP group of one rank");
}

void OneRankCommunicator::run_recv(BufferView, size_t, int peer) {
  throw Error("recv from rank " + std::to_string(peer) + " in a TP group of one rank");
}

}  // namespace tpbatch
