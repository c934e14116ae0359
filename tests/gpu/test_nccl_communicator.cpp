// The NCCL data plane on the CUDA backend's stream, with two ranks. Runs only under mpirun with
// two ranks and a GPU, e.g. on one GPU (NCCL then needs a host id per rank, and the device check
// an override):
//   mpirun -np 2 bash -c 'NCCL_HOSTID=r$OMPI_COMM_WORLD_RANK TPBATCH_ALLOW_SHARED_GPU=1 \
//     exec tests/tpbatch_gpu_tests --gtest_filter=Nccl*'
// Otherwise every test skips (the plain `ctest -L gpu` run is one process).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/device_selection.h"

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
    check_tp_group_gpus(gather_group_gpus(MPI_COMM_WORLD, 0, device), shared_gpu_allowed_by_env());
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

}  // namespace
}  // namespace tpbatch
