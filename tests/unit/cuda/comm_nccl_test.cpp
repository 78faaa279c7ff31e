// The NCCL communicator's MPI bootstrap (id made on the first rank, broadcast over MPI) on a
// one-rank group. Without a GPU, ncclCommInitRank must fail as a catalogue error; with one, the
// communicator works on device buffers.
#include "parallel/nccl/comm_nccl.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "core/errors.h"

namespace qmpi {
namespace {

void init_mpi_once() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  MPI_Init(nullptr, nullptr);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

TEST(NcclComm, OneRankGroupStartsOrFailsAsNcclInit) {
  init_mpi_once();
  const cuda::CudaProbe p = cuda::probe_cuda();
  if (!p.usable) {
    try {
      NcclComm comm(MPI_COMM_SELF, "test group");
      FAIL() << "NCCL started without a GPU";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::NcclInit) << e.render();
      EXPECT_NE(e.message().find("ncclCommInitRank"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("test group"), std::string::npos) << e.message();
    }
    return;
  }
  std::unique_ptr<Backend> be = make_cuda_backend();  // selects the device NCCL uses
  std::unique_ptr<Comm> comm = make_nccl_comm(MPI_COMM_SELF, "test group");
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->describe(), "test group");
  std::vector<float> host = {1.5f, -2.0f, 3.25f};
  Buffer data = be->alloc(host.size() * sizeof(float));
  Buffer gathered = be->alloc(host.size() * sizeof(float));
  be->copy_to_device(data.data(), host.data(), host.size() * sizeof(float));
  comm->all_reduce_sum(data.as<float>(), host.size());
  comm->all_gather(data.data(), gathered.data(), host.size() * sizeof(float));
  comm->barrier();
  std::vector<float> back(host.size());
  be->copy_to_host(back.data(), gathered.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, host);
}

}  // namespace
}  // namespace qmpi
