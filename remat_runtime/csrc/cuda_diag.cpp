// CUDA diagnostics: the caching allocator's out-of-memory observer and
// per-allocation contexts (what annotates report rows), its byte counters,
// and the current stream (what the GPU checks measure and switch). Compiled only with
// the `cuda` feature (REMAT_CUDA): it needs the CUDA headers and
// libc10_cuda. CPU builds get the stubs at the end of bridge.cpp instead.
// See bridge.h for the conventions.

#include "bridge.h"
#include "guard.h"

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
const remat_callbacks* remat_internal_callbacks(void);
}

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

using remat_bridge::dup_string;
using remat_bridge::guard;

// What remat records for an allocation: a label from Rust (the checkpoint,
// region and phase running when it was made).
struct RematContext final : public c10::GatheredContext {
  explicit RematContext(std::string label) : label(std::move(label)) {}
  std::string label;
};

std::shared_ptr<c10::GatheredContext> gather_context() {
  const remat_callbacks* cb = remat_internal_callbacks();
  if (cb->cuda_alloc_context == nullptr) {
    return nullptr;
  }
  std::vector<char> buf(256);
  size_t n = cb->cuda_alloc_context(buf.data(), buf.size());
  if (n > buf.size()) {
    buf.resize(n);
    n = cb->cuda_alloc_context(buf.data(), buf.size());
  }
  return std::make_shared<RematContext>(
      std::string(buf.data(), std::min(n, buf.size())));
}

}  // namespace

extern "C" {

int remat_cuda_built(void) { return 1; }

remat_err remat_cuda_attach_oom_observer(void) {
  return guard([&] {
    alloc::attachOutOfMemoryObserver([](int64_t device, size_t requested,
                                        size_t device_total,
                                        size_t device_free) {
      // The Rust side catches its own panics; nothing unwinds into the
      // allocator, which goes on to raise its OutOfMemoryError.
      remat_internal_callbacks()->cuda_oom(device, requested, device_total,
                                           device_free);
    });
  });
}

remat_err remat_cuda_record_contexts(int enabled) {
  return guard([&] {
    alloc::recordHistory(enabled != 0, enabled != 0 ? &gather_context : nullptr,
                         /*alloc_trace_max_entries=*/0,
                         enabled != 0 ? c10::CachingDeviceAllocator::RecordContext::STATE
                                      : c10::CachingDeviceAllocator::RecordContext::NEVER,
                         /*clearHistory=*/false, /*skip_actions=*/{});
  });
}

remat_err remat_cuda_blocks(char** out) {
  *out = nullptr;
  return guard([&] {
    std::ostringstream lines;
    auto snapshot = alloc::snapshot({0, 0}, /*include_traces=*/false);
    for (const auto& segment : snapshot.segments) {
      size_t address = segment.address;
      for (const auto& block : segment.blocks) {
        if (block.allocated) {
          std::string label;
          if (auto* ctx = dynamic_cast<RematContext*>(
                  block.context_when_allocated.get())) {
            label = ctx->label;
          }
          for (char& c : label) {
            if (c == '\n') {
              c = ' ';
            }
          }
          lines << address << ' ' << block.size << ' ' << label << '\n';
        }
        address += block.size;
      }
    }
    *out = dup_string(lines.str().c_str());
  });
}

remat_err remat_cuda_memory_stats(int device, int64_t* out) {
  return guard([&] {
    auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    // Index 0 of each array is the aggregate over the small and large pools
    // (StatType::AGGREGATE, whose namespace moved between releases).
    out[0] = stats.allocated_bytes[0].current;
    out[1] = stats.allocated_bytes[0].peak;
    out[2] = stats.reserved_bytes[0].current;
    out[3] = stats.reserved_bytes[0].peak;
  });
}

remat_err remat_cuda_reset_peak(int device) {
  return guard(
      [&] { alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device)); });
}

remat_err remat_cuda_use_stream(int device, int side, int64_t* id) {
  return guard([&] {
    auto index = static_cast<c10::DeviceIndex>(device);
    auto stream = side != 0 ? c10::cuda::getStreamFromPool(false, index)
                            : c10::cuda::getDefaultCUDAStream(index);
    c10::cuda::setCurrentCUDAStream(stream);
    *id = stream.id();
  });
}

remat_err remat_cuda_current_stream(int device, int64_t* id) {
  return guard([&] {
    *id = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device))
              .id();
  });
}

}  // extern "C"
