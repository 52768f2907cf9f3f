// Offload copies on CUDA (docs/semantics.md, rule O5): out to pinned host
// memory and back, on a side stream per device, ordered with the current
// stream by events. Compiled only with the `cuda` feature (REMAT_CUDA); CPU
// builds get the stubs at the end of bridge.cpp. See bridge.h for the
// conventions.

#include "bridge.h"
#include "guard.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <memory>
#include <mutex>

namespace {

using remat_bridge::guard;

// One side stream per device, made once: copies queue behind each other in
// forward order there, while compute goes on on the current stream.
c10::cuda::CUDAStream side_stream(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(device);
  if (it == streams.end()) {
    it = streams
             .emplace(device, c10::cuda::getStreamFromPool(
                                  /*isHighPriority=*/false, device))
             .first;
  }
  return it->second;
}

// c10's device-generic event and stream guard, not ATen's CUDAEvent or
// c10's CUDAStreamGuard: the first needs CUDA headers the torch wheel does
// not ship, the second inlines calls into the CUDA runtime (libtorch 2.11's
// CUDAGuardImpl), and the generic ones reach CUDA through libc10_cuda, so
// remat links no CUDA runtime of its own.
c10::Event* as_event(void* event) { return static_cast<c10::Event*>(event); }

std::unique_ptr<c10::Event> recorded_on(const c10::cuda::CUDAStream& stream) {
  auto event = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
  event->record(stream.unwrap());
  return event;
}

}  // namespace

extern "C" {

remat_err remat_cuda_copy_out(const remat_tensor* src, remat_tensor** out,
                              void** event) {
  return guard([&] {
    const auto device = src->device().index();
    auto current = c10::cuda::getCurrentCUDAStream(device);
    auto side = side_stream(device);
    // The copy starts after the work that produced `src`.
    recorded_on(current)->block(side.unwrap());
    at::Tensor host = at::empty(
        src->sizes(), src->options().device(at::kCPU).pinned_memory(true));
    {
      c10::StreamGuard on_side(side.unwrap());
      host.copy_(*src, /*non_blocking=*/true);
    }
    // `src` may be freed before the copy ran: its block is not reused
    // until the side stream's work so far is done.
    c10::cuda::CUDACachingAllocator::recordStream(src->storage().data_ptr(),
                                                 side);
    *out = new at::Tensor(std::move(host));
    *event = recorded_on(side).release();
  });
}

remat_err remat_cuda_copy_back(const remat_tensor* host, int device,
                               void* after, remat_tensor** out,
                               void** event) {
  return guard([&] {
    auto side = side_stream(static_cast<c10::DeviceIndex>(device));
    as_event(after)->block(side.unwrap());
    at::Tensor back;
    {
      c10::StreamGuard on_side(side.unwrap());
      back = at::empty(host->sizes(),
                       host->options().device(
                           at::Device(at::kCUDA,
                                      static_cast<c10::DeviceIndex>(device))));
      back.copy_(*host, /*non_blocking=*/true);
    }
    *out = new at::Tensor(std::move(back));
    *event = recorded_on(side).release();
  });
}

remat_err remat_cuda_use(const remat_tensor* t, void* event) {
  return guard([&] {
    auto current = c10::cuda::getCurrentCUDAStream(t->device().index());
    as_event(event)->block(current.unwrap());
    // Allocated on the side stream, used on this one from now on.
    c10::cuda::CUDACachingAllocator::recordStream(t->storage().data_ptr(),
                                                 current);
  });
}

void remat_cuda_event_free(void* event) { delete as_event(event); }

}  // extern "C"
