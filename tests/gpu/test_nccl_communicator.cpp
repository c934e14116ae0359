// The NCCL data plane on the CUDA backend's stream, with two ranks: the collectives, pipeline
// send/recv, and the abort path of the backend's watched host waits (backend/nccl_watch.h).
// Runs only under mpirun with two ranks and a GPU, e.g. on one GPU (NCCL then needs a host id per
// rank, and the device check an override), as scripts/gpu_check.sh runs them:
//   mpirun -np 2 bash -c 'NCCL_HOSTID=r$OMPI_COMM_WORLD_RANK TPBATCH_ALLOW_SHARED_GPU=1 \
//     exec tests/tpbatch_gpu_tests --gtest_filter=Nccl.*'
// The NcclAbort tests leave a communicator aborted (and, on one rank, the backend): run each in its
// own mpirun (--gtest_filter=NcclAbort.<name>). Otherwise every test skips (the plain
// `ctest -L gpu` run is one process).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/device_selection.h"
#include "backend/nccl_watch.h"
#include "common/error.h"

namespace tpbatch {
namespace {

bool under_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"); }

// MPI for the whole binary when launched by mpirun (gtest_main knows nothing of MPI).
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!under_mpirun()) return;
    MPI_Init(nullptr, nullptr);
    started_ = true;
  }
  void TearDown() override {
    if (started_) MPI_Finalize();
  }

 private:
  bool started_ = false;
};
[[maybe_unused]] const auto* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!under_mpirun()) GTEST_SKIP() << "not under mpirun";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (size_ != 2) GTEST_SKIP() << "needs exactly 2 ranks";
    const int device = rank_ % cuda_device_count();
    check_tp_group_gpus(gather_group_gpus(MPI_COMM_WORLD, 0, device, cuda_device_bus_id(device)),
                        shared_gpu_allowed_by_env());
    backend_ = make_cuda_backend(device);
    comm_ = make_nccl_communicator(MPI_COMM_WORLD, *backend_);
  }
  void TearDown() override {
    comm_.reset();
    backend_.reset();
  }
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(Nccl, AllreduceSumsF32AndBf16OnTheStream) {
  const size_t n = 1000;
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), float(rank_));  // rank r: r, r+1, ...
  Buffer f = backend_->alloc(n, DType::F32);
  backend_->upload(f.view(), v.data(), n * 4);
  comm_->allreduce_sum(f.view(), n);
  std::vector<float> got(n);
  backend_->download(f.view(), got.data(), n * 4);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float(2 * i + 1)) << i;
  std::vector<uint16_t> b(n, f32_to_bf16(float(rank_ + 1))), gb(n);
  Buffer bb = backend_->alloc(n, DType::BF16);
  backend_->upload(bb.view(), b.data(), n * 2);
  comm_->allreduce_sum(bb.view(), n);
  backend_->download(bb.view(), gb.data(), n * 2);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(bf16_to_f32(gb[i]), 3.0f) << i;
  EXPECT_EQ(comm_->stats().at("allreduce").calls, 2);
}

TEST_F(Nccl, AllreduceMaxTakesEachElementsLargestOverTheRanks) {
  const size_t n = 300;
  std::vector<float> v(n);
  // Even elements: the last rank's is largest; odd ones: rank 0's.
  for (size_t i = 0; i < n; ++i) v[i] = i % 2 == 0 ? float(rank_) - float(i) : float(i) - float(rank_);
  Buffer f = backend_->alloc(n, DType::F32);
  backend_->upload(f.view(), v.data(), n * 4);
  comm_->allreduce_max(f.view(), n);
  std::vector<float> got(n);
  backend_->download(f.view(), got.data(), n * 4);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], i % 2 == 0 ? float(size_ - 1) - float(i) : float(i)) << i;
  EXPECT_EQ(comm_->stats().at("allreduce max").calls, 1);
}

TEST_F(Nccl, AllgatherPutsBlocksInRankOrder) {
  const int32_t mine[4] = {rank_ * 10, rank_ * 10 + 1, rank_ * 10 + 2, rank_ * 10 + 3};
  Buffer send = backend_->alloc(4, DType::I32), recv = backend_->alloc(8, DType::I32);
  backend_->upload(send.view(), mine, sizeof mine);
  comm_->allgather(send.view(), recv.view(), sizeof mine);
  std::vector<int32_t> got(8);
  backend_->download(recv.view(), got.data(), 32);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13}));
}

TEST_F(Nccl, SendRecvBothWaysInCallOrder) {
  std::vector<float> a(5000, float(rank_ + 1)), got(5000);
  Buffer out = backend_->alloc(a.size(), DType::F32), in = backend_->alloc(a.size(), DType::F32);
  backend_->upload(out.view(), a.data(), a.size() * 4);
  const int peer = 1 - rank_;
  // Rank 0 sends first, rank 1 receives first: a pipeline's order, no deadlock.
  for (int round = 0; round < 2; ++round) {
    if (rank_ == 0) {
      comm_->send(out.view(), a.size() * 4, peer);
      comm_->recv(in.view(), a.size() * 4, peer);
    } else {
      comm_->recv(in.view(), a.size() * 4, peer);
      comm_->send(out.view(), a.size() * 4, peer);
    }
  }
  backend_->download(in.view(), got.data(), got.size() * 4);
  for (float x : got) ASSERT_EQ(x, float(peer + 1));
  EXPECT_EQ(comm_->stats().at("send").calls, 2);
  EXPECT_EQ(comm_->stats().at("recv").calls, 2);
}

// The abort path: the communicator as the backend's host waits see it (an AsyncErrorSource).
// Keeps the emulated device honest: its NCCL stand-in rounds a bf16 sum after each addition, in
// rank order (cuemu/nccl.cpp); with two ranks that is one rounded addition, which real NCCL's
// reduction must give too, bit for bit, on random values of every magnitude.
TEST_F(Nccl, Bf16AllreduceOfTwoRanksIsOneRoundedAdditionAsTheEmulatorSums) {
  const size_t n = 4099;  // not a multiple of NCCL's chunking either
  std::vector<uint16_t> mine(n), theirs(n), got(n);
  for (int r = 0; r < 2; ++r) {
    std::mt19937 rng(100 + r);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exp(-20, 20);
    std::vector<uint16_t>& v = r == rank_ ? mine : theirs;
    for (size_t i = 0; i < n; ++i) v[i] = f32_to_bf16(std::ldexp(mant(rng), exp(rng)));
  }
  Buffer b = backend_->alloc(n, DType::BF16);
  backend_->upload(b.view(), mine.data(), n * 2);
  comm_->allreduce_sum(b.view(), n);
  backend_->download(b.view(), got.data(), n * 2);
  const std::vector<uint16_t>& r0 = rank_ == 0 ? mine : theirs;
  const std::vector<uint16_t>& r1 = rank_ == 0 ? theirs : mine;
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], f32_to_bf16(bf16_to_f32(r0[i]) + bf16_to_f32(r1[i])))
        << "at " << i << ": " << bf16_to_f32(r0[i]) << " + " << bf16_to_f32(r1[i]);
}

class NcclAbort : public Nccl {
 protected:
  static constexpr size_t kBytes = 4096;
  AsyncErrorSource& source() { return dynamic_cast<AsyncErrorSource&>(*comm_); }
  // One message from rank 0 to rank 1 first: NCCL connects a pair at its first send/recv (on the
  // host, with both sides taking part), so what follows meets an established connection.
  void connect(const Buffer& buf) {
    if (rank_ == 0)
      comm_->send(buf.view(), kBytes, 1);
    else
      comm_->recv(buf.view(), kBytes, 0);
    backend_->synchronize();
    MPI_Barrier(MPI_COMM_WORLD);
  }
};

// ncclCommAbort ends the communicator's pending kernels: a receive that will never be matched no
// longer holds the stream, and the aborted communicator refuses further calls.
TEST_F(NcclAbort, AbortEndsAPendingReceiveAndTheStreamDrains) {
  Buffer buf = backend_->alloc(kBytes / 4, DType::F32);
  connect(buf);
  if (rank_ == 1) {
    comm_->recv(buf.view(), kBytes, 0);  // rank 0 never sends it
    source().abort();
    EXPECT_NO_THROW(backend_->synchronize());
    EXPECT_THROW(comm_->recv(buf.view(), kBytes, 0), Error);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A peer that goes away while this rank waits for it (rank 0 aborts its communicator, which closes
// its connections as a dying process's would): NCCL reports an asynchronous error on rank 1, whose
// host wait then aborts its communicators and throws instead of hanging; the backend stays aborted.
TEST_F(NcclAbort, PeerGoneDuringAWaitAbortsTheCommunicatorsAndThrows) {
  Buffer buf = backend_->alloc(kBytes / 4, DType::F32);
  connect(buf);
  if (rank_ == 1) comm_->recv(buf.view(), kBytes, 0);  // rank 0 never sends it
  MPI_Barrier(MPI_COMM_WORLD);                          // queued before the peer goes
  if (rank_ == 0) {
    source().abort();
  } else {
    try {
      backend_->synchronize();
      ADD_FAILURE() << "expected the wait to throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("communicators aborted"), std::string::npos) << e.what();
    }
    EXPECT_THROW(backend_->synchronize(), Error);
    EXPECT_THROW(comm_->recv(buf.view(), kBytes, 0), Error);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace tpbatch
