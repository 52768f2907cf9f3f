// The NCCL backend, compiled only with the `cuda` feature (build.rs), with
// USE_C10D_NCCL defined as libtorch was built: c10d's ProcessGroupNCCL,
// whose code libtorch_cuda.so carries, over the group's store. dist.cpp
// calls it; errors are C++ exceptions that dist.cpp's `guard` catches.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <chrono>

namespace remat_nccl {

c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int world_size,
                                               std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, opts);
}

}  // namespace remat_nccl
