// libtorch's default random generators as one snapshot: what a checkpoint
// keeps so that its recomputation draws the numbers its forward drew
// (docs/semantics.md, rule C14). The CPU generator's whole engine (its
// Mersenne Twister state and cached normal samples, copied as plain data:
// no tensor is made) and, for every visible CUDA device, its seed and
// offset (read through the generic generator interface, so that this unit
// needs no CUDA headers).
//
// Invariant: a snapshot is immutable once taken; comparing it with the live
// generators allocates nothing, which keeps the forward's check for draws
// (one per `Save` region and one per checkpoint) cheap.

#include "bridge.h"
#include "guard.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <mutex>
#include <optional>
#include <vector>

using remat_bridge::guard;

namespace {

struct CudaState {
  uint64_t seed;
  uint64_t offset;
};

struct Snapshot {
  at::mt19937 engine;
  std::optional<float> next_float;
  std::optional<double> next_double;
  std::vector<CudaState> cuda;
};

// The CUDA devices, counted once: without the CUDA backend (a CPU build, or
// no device) none, and nothing CUDA is initialised for it.
int cuda_devices() {
  static const int count = [] {
    if (!at::globalContext().hasCUDA()) {
      return 0;
    }
    return static_cast<int>(at::detail::getCUDAHooks().deviceCount());
  }();
  return count;
}

at::Generator cuda_generator(int device) {
  return at::globalContext().defaultGenerator(
      c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

bool same_engine(const at::mt19937& a, const at::mt19937& b) {
  // Field by field: the data struct has padding, whose bytes are not part
  // of the state.
  const auto x = a.data();
  const auto y = b.data();
  return x.seed_ == y.seed_ && x.left_ == y.left_ && x.seeded_ == y.seeded_ &&
         x.next_ == y.next_ && x.state_ == y.state_;
}

}  // namespace

remat_err remat_generators_take(void** out) {
  *out = nullptr;
  return guard([&] {
    auto snapshot = std::make_unique<Snapshot>();
    {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      auto* cpu = gen.get<at::CPUGeneratorImpl>();
      snapshot->engine = cpu->engine();
      snapshot->next_float = cpu->next_float_normal_sample();
      snapshot->next_double = cpu->next_double_normal_sample();
    }
    const int devices = cuda_devices();
    snapshot->cuda.reserve(devices);
    for (int i = 0; i < devices; ++i) {
      at::Generator gen = cuda_generator(i);
      std::lock_guard<std::mutex> lock(gen.mutex());
      snapshot->cuda.push_back({gen.current_seed(), gen.get_offset()});
    }
    *out = snapshot.release();
  });
}

remat_err remat_generators_is_current(const void* snapshot, int* out) {
  return guard([&] {
    const auto* s = static_cast<const Snapshot*>(snapshot);
    bool same = true;
    {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      auto* cpu = gen.get<at::CPUGeneratorImpl>();
      same = cpu->next_float_normal_sample() == s->next_float &&
             cpu->next_double_normal_sample() == s->next_double &&
             same_engine(cpu->engine(), s->engine);
    }
    for (size_t i = 0; same && i < s->cuda.size(); ++i) {
      at::Generator gen = cuda_generator(static_cast<int>(i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      same = gen.current_seed() == s->cuda[i].seed &&
             gen.get_offset() == s->cuda[i].offset;
    }
    *out = same ? 1 : 0;
  });
}

remat_err remat_generators_restore(const void* snapshot) {
  return guard([&] {
    const auto* s = static_cast<const Snapshot*>(snapshot);
    {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      auto* cpu = gen.get<at::CPUGeneratorImpl>();
      cpu->set_engine(s->engine);
      cpu->set_next_float_normal_sample(s->next_float);
      cpu->set_next_double_normal_sample(s->next_double);
    }
    for (size_t i = 0; i < s->cuda.size(); ++i) {
      at::Generator gen = cuda_generator(static_cast<int>(i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      // Setting the seed resets the offset: the offset goes second.
      gen.set_current_seed(s->cuda[i].seed);
      gen.set_offset(s->cuda[i].offset);
    }
  });
}

void remat_generators_free(void* snapshot) {
  delete static_cast<Snapshot*>(snapshot);
}
