// Autocast state of the calling thread (ATen/autocast_mode.h), read and
// written as one struct, so that a checkpoint can capture it on the forward
// in one crossing and recompute under exactly that state (docs/semantics.md,
// rule A2). tch exposes none of this except a CUDA-only, fp16-only scope.
#include "guard.h"

#include <ATen/autocast_mode.h>

namespace {

using remat_bridge::guard;

// The device types libtorch has autocast for, in the order of
// `remat_autocast_state`'s arrays (bridge.h). A type this libtorch does not
// support is skipped: `is_autocast_available` is its own list.
constexpr c10::DeviceType kDevices[REMAT_AUTOCAST_DEVICES] = {
    c10::DeviceType::CPU,  c10::DeviceType::CUDA, c10::DeviceType::XPU,
    c10::DeviceType::MPS,  c10::DeviceType::HPU,  c10::DeviceType::XLA,
    c10::DeviceType::PrivateUse1, c10::DeviceType::IPU,
    c10::DeviceType::MTIA, c10::DeviceType::MAIA,
};

}  // namespace

extern "C" {

remat_err remat_autocast_get(remat_autocast_state* out) {
  return guard([&] {
    for (int i = 0; i < REMAT_AUTOCAST_DEVICES; ++i) {
      auto device = kDevices[i];
      bool available = at::autocast::is_autocast_available(device);
      out->available[i] = available;
      out->enabled[i] = available && at::autocast::is_autocast_enabled(device);
      out->dtype[i] = available
          ? static_cast<int8_t>(at::autocast::get_autocast_dtype(device))
          : static_cast<int8_t>(-1);
    }
    out->cache_enabled = at::autocast::is_autocast_cache_enabled();
  });
}

remat_err remat_autocast_set(const remat_autocast_state* state) {
  return guard([&] {
    for (int i = 0; i < REMAT_AUTOCAST_DEVICES; ++i) {
      auto device = kDevices[i];
      if (!state->available[i] || !at::autocast::is_autocast_available(device)) {
        continue;
      }
      at::autocast::set_autocast_enabled(device, state->enabled[i] != 0);
      at::autocast::set_autocast_dtype(
          device, static_cast<c10::ScalarType>(state->dtype[i]));
    }
    at::autocast::set_autocast_cache_enabled(state->cache_enabled != 0);
  });
}

int remat_autocast_increment_nesting(void) {
  return at::autocast::increment_nesting();
}

int remat_autocast_decrement_nesting(void) {
  return at::autocast::decrement_nesting();
}

remat_err remat_autocast_clear_cache(void) {
  return guard([] { at::autocast::clear_cache(); });
}

}  // extern "C"
