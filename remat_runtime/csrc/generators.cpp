// libtorch's default random generators as one snapshot: what a checkpoint
// keeps so that its recomputation draws the numbers its forward drew
// (docs/semantics.md, rule C14). The CPU generator's whole engine (its
// Mersenne Twister state and cached normal samples, copied as plain data:
// no tensor is made) and, for every visible CUDA device, its seed and
// offset (read through the generic generator interface, so that this unit
// needs no CUDA headers).
//
// Invariant: a snapshot is immutable once taken; comparing it with the live
// generators allocates nothing, and snapshots are recycled through a small
// per-thread pool, since one is taken per checkpoint and most are dropped
// when their forward ends (one that drew nothing keeps none, C20): a fresh
// 2.5 KB allocation each time is above glibc's small bins and would make it
// consolidate its fast bins on every checkpoint.

#include "bridge.h"
#include "guard.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>
#include <memory>
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
  at::mt19937_data_pod engine;
  std::optional<float> next_float;
  std::optional<double> next_double;
  std::vector<CudaState> cuda;
};

// Snapshots freed on this thread, for the next take: the pool never holds
// more than a model's worth of nesting needs at once.
constexpr size_t kPoolSize = 16;

struct Pool {
  std::vector<std::unique_ptr<Snapshot>> free;
  ~Pool() = default;
};

thread_local Pool t_pool;

std::unique_ptr<Snapshot> fresh() {
  if (!t_pool.free.empty()) {
    auto s = std::move(t_pool.free.back());
    t_pool.free.pop_back();
    return s;
  }
  return std::make_unique<Snapshot>();
}

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

// The CPU engine's state, read in place. `CPUGeneratorImpl::engine()` and
// `mt19937::data()` each return a 2.5 KB copy: comparing through them cost
// two copies per comparison, and a checkpoint compares at every `Save`
// region's exit (rule C14), the largest part of a region's cost on the
// forward. Neither class offers a reference, so the two private members are
// named through an explicit instantiation, where C++ does not check access
// ([temp.spec.general]/6): the compiler still checks their types, so a
// libtorch whose members change name or type fails to build here instead of
// reading the wrong bytes.
template <typename Tag, typename Tag::type Member>
struct Expose {
  friend typename Tag::type member(Tag) { return Member; }
};

struct EngineOfGenerator {
  using type = at::mt19937 at::CPUGeneratorImpl::*;
  friend type member(EngineOfGenerator);
};
template struct Expose<EngineOfGenerator, &at::CPUGeneratorImpl::engine_>;

struct DataOfEngine {
  using type = at::mt19937_data_pod at::mt19937::*;
  friend type member(DataOfEngine);
};
template struct Expose<DataOfEngine, &at::mt19937::data_>;

// The caller holds the generator's mutex.
const at::mt19937_data_pod& engine_state(const at::CPUGeneratorImpl& cpu) {
  return (cpu.*member(EngineOfGenerator{})).*member(DataOfEngine{});
}

bool same_engine(const at::mt19937_data_pod& x, const at::mt19937_data_pod& y) {
  // Field by field: the struct has padding, whose bytes are not state.
  return x.seed_ == y.seed_ && x.left_ == y.left_ && x.seeded_ == y.seeded_ &&
         x.next_ == y.next_ &&
         std::memcmp(x.state_.data(), y.state_.data(), sizeof(x.state_)) == 0;
}

}  // namespace

remat_err remat_generators_take(void** out) {
  *out = nullptr;
  return guard([&] {
    auto snapshot = fresh();
    {
      auto* cpu = at::detail::getDefaultCPUGenerator().get<at::CPUGeneratorImpl>();
      std::lock_guard<std::mutex> lock(cpu->mutex_);
      snapshot->engine = engine_state(*cpu);
      snapshot->next_float = cpu->next_float_normal_sample();
      snapshot->next_double = cpu->next_double_normal_sample();
    }
    const int devices = cuda_devices();
    snapshot->cuda.clear();
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
      auto* cpu = at::detail::getDefaultCPUGenerator().get<at::CPUGeneratorImpl>();
      std::lock_guard<std::mutex> lock(cpu->mutex_);
      // The engine first: the cheap fields of its state differ after any draw.
      same = same_engine(engine_state(*cpu), s->engine) &&
             cpu->next_float_normal_sample() == s->next_float &&
             cpu->next_double_normal_sample() == s->next_double;
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
      at::mt19937 engine;
      engine.set_data(s->engine);
      cpu->set_engine(engine);
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
  std::unique_ptr<Snapshot> s(static_cast<Snapshot*>(snapshot));
  if (t_pool.free.size() < kPoolSize) {
    t_pool.free.push_back(std::move(s));
  }
}
