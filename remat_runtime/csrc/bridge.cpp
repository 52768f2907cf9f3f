// The libtorch side of remat: the few C++ APIs that tch does not expose.
// See bridge.h for the ownership and error conventions, and
// docs/architecture.md for why each API is used.

#include "bridge.h"
#include "guard.h"
#include "placeholder.h"

#include <ATen/ATen.h>
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/headeronly/version.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::SavedVariableHooks;
using torch::autograd::variable_list;

remat_callbacks g_cb;

using remat_bridge::dup_string;
using remat_bridge::guard;

// A new autograd node. libtorch 2.13 counts nodes intrusively (Node is an
// intrusive_ptr_target, and Edge holds a c10::intrusive_ptr); 2.11 holds
// them in std::shared_ptr and has no intrusive count to construct one with.
// Everything else the bridge does with a node handle (`->`, `.get()`,
// `Edge(node, nr)`, `getptr()`) is spelled alike for both, so this is the
// one place the versions differ.
template <typename T, typename... Args>
auto make_node(Args&&... args) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
  return c10::make_intrusive<T>(std::forward<Args>(args)...);
#else
  return std::make_shared<T>(std::forward<Args>(args)...);
#endif
}

// Takes ownership of a tensor that Rust handed over.
at::Tensor take(at::Tensor* t) {
  at::Tensor out = std::move(*t);
  delete t;
  return out;
}

// ---------------------------------------------------------------------------
// Custom autograd node whose backward is a Rust closure.

struct RustNode final : public Node {
  RustNode(void* ctx, std::string name, torch::autograd::edge_list&& edges)
      : Node(std::move(edges)), ctx_(ctx), name_(std::move(name)) {}

  ~RustNode() override {
    saved_.clear();
    g_cb.node_drop(ctx_);
  }

  std::string name() const override { return name_; }

  variable_list apply(variable_list&& grads) override {
    // tch tensors are Send but not Sync: one backward of this node at a time.
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<at::Tensor*> grad_ptrs(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) {
        grads[i] = input_metadata(i).zeros_like();
      }
      grad_ptrs[i] = &grads[i];
    }
    size_t n_out = num_outputs();
    std::vector<at::Tensor*> outs(n_out, nullptr);
    std::string err;
    int rc = g_cb.node_apply(ctx_, this, grad_ptrs.data(), grad_ptrs.size(),
                             outs.data(), n_out, &err);
    variable_list result(n_out);
    for (size_t i = 0; i < n_out; ++i) {
      if (outs[i] != nullptr) {
        result[i] = take(outs[i]);
      }
    }
    if (rc != 0) {
      throw std::runtime_error(err);
    }
    return result;
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& s : saved_) {
      s.reset_data();
    }
    g_cb.node_release(ctx_);
  }

  at::Tensor unpack_saved(size_t i) {
    TORCH_CHECK(i < saved_.size(), "saved tensor index ", i,
                " out of range: the function saved ", saved_.size());
    return saved_[i].unpack(getptr());
  }

  void* ctx_;
  std::string name_;
  std::mutex mutex_;
  std::vector<SavedVariable> saved_;
};

// The grad_fn of a value served on replay: it only gives the value the
// autograd identity (non-leaf, requires grad) its forward counterpart had,
// inside a replay graph that is thrown away, so it must never run. Made in
// C++ because replay makes one per served value.
struct ServedNode final : public Node {
  std::string name() const override { return "ServedOnReplay"; }
  variable_list apply(variable_list&& /*grads*/) override {
    throw std::runtime_error(
        "remat internal error: a value served on replay was backpropagated");
  }
};

// ---------------------------------------------------------------------------
// Default saved-tensor hooks served from a per-thread stack of Rust pairs.

// A parameter is a leaf that requires grad; a view of one (`w.t()` saved by
// addmm) counts as one too, since it keeps the parameter's storage.
bool is_parameter(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return false;
  }
  if (tensor.requires_grad() && tensor.is_leaf()) {
    return true;
  }
  if (!tensor.is_view()) {
    return false;
  }
  const at::TensorBase& base = tensor._base();
  if (base.defined() && base.requires_grad() && base.is_leaf()) {
    return true;
  }
  // A parameter that is itself a view (a slice or reshape of a buffer that
  // needs no gradient) is not the base of its own views: follow the view's
  // chain of one-input nodes back to an accumulator whose parameter shares
  // its storage.
  const c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  Node* fn = tensor.grad_fn().get();
  for (int depth = 0; fn != nullptr && depth < 16; ++depth) {
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(fn)) {
      return acc->variable.storage().unsafeGetStorageImpl() == storage;
    }
    const auto& edges = fn->next_edges();
    if (edges.size() != 1) {
      return false;
    }
    fn = edges[0].function.get();
  }
  return false;
}

struct HookPair {
  explicit HookPair(void* rust) : rust(rust) {}
  ~HookPair() {
    if (rust != nullptr) {
      g_cb.hooks_drop(rust);
    }
  }
  HookPair(const HookPair&) = delete;
  HookPair& operator=(const HookPair&) = delete;
  void* rust;
};

thread_local std::vector<std::shared_ptr<HookPair>> t_hook_stack;

struct RustSavedHooks final : public SavedVariableHooks {
  explicit RustSavedHooks(std::shared_ptr<HookPair> pair)
      : pair_(std::move(pair)) {}

  void call_pack_hook(const at::Tensor& tensor) override {
    // A detached alias: keeping the tensor itself (an op's saved output)
    // would make a cycle through its grad_fn and leak the graph.
    auto* alias = new at::Tensor(tensor.detach());
    std::string err;
    int param = is_parameter(tensor);
    // Generated autograd code creates the node (taking the thread's next
    // sequence number) right before it saves the node's inputs and right
    // after it sets the outputs' history, so the node saving this tensor is
    // the last one this thread created.
    uint64_t seq = at::sequence_number::peek();
    uint64_t thread = at::RecordFunction::currentThreadId();
    void* payload =
        g_cb.hooks_pack(pair_->rust, alias, param, thread, seq, &err);
    if (payload == nullptr) {
      throw std::runtime_error(err);
    }
    payload_ = payload;
  }

  at::Tensor call_unpack_hook() override {
    std::string err;
    at::Tensor* out = g_cb.hooks_unpack(pair_->rust, payload_, &err);
    if (out == nullptr) {
      throw std::runtime_error(err);
    }
    return take(out);
  }

  ~RustSavedHooks() override {
    if (payload_ != nullptr) {
      g_cb.payload_drop(pair_->rust, payload_);
    }
  }

 private:
  std::shared_ptr<HookPair> pair_;
  void* payload_ = nullptr;
};

// libtorch asks the default engine for the default hooks of every
// SavedVariable; without Python that is always "none". This engine answers
// from the thread's stack instead and otherwise behaves as the stock one.
struct RematEngine final : public torch::autograd::Engine {
  RematEngine() = default;
  ~RematEngine() override { stop(); }

  std::unique_ptr<SavedVariableHooks> get_default_saved_variable_hooks()
      override {
    if (t_hook_stack.empty()) {
      return Engine::get_default_saved_variable_hooks();
    }
    const auto& top = t_hook_stack.back();
    if (top->rust == nullptr) {
      return nullptr;
    }
    return std::make_unique<RustSavedHooks>(top);
  }
};

torch::autograd::Engine& remat_engine() {
  static RematEngine engine;
  return engine;
}

// Distinguishes placeholder storages from any other null-data storage.
char g_placeholder_tag;
void placeholder_delete(void* /*ctx*/) {}

c10::Device device_from_int(int device) {
  if (device == -1) {
    return c10::Device(c10::kCPU);
  }
  TORCH_CHECK(device >= 0, "unsupported device code ", device,
              " (placeholders support CPU and CUDA)");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
}

at::Generator default_generator(int device) {
  if (device < 0) {
    return at::detail::getDefaultCPUGenerator();
  }
  return at::globalContext().defaultGenerator(
      c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

c10::StorageImpl* storage_of(const at::Tensor* t) {
  if (t == nullptr || !t->defined() || !t->has_storage()) {
    return nullptr;
  }
  return t->storage().unsafeGetStorageImpl();
}

// Calls `visit` once on every node reachable from the roots' grad_fns.
template <typename Visit>
void for_each_node(const remat_tensor* const* roots, size_t n_roots,
                   Visit visit) {
  std::unordered_set<Node*> seen;
  std::vector<Node*> todo;
  for (size_t i = 0; i < n_roots; ++i) {
    if (roots[i] != nullptr && roots[i]->defined() && roots[i]->grad_fn()) {
      todo.push_back(roots[i]->grad_fn().get());
    }
  }
  while (!todo.empty()) {
    Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) {
      continue;
    }
    visit(node);
    for (const auto& edge : node->next_edges()) {
      if (edge.function) {
        todo.push_back(edge.function.get());
      }
    }
  }
}

// The peak remat_heap_watch's hooks have seen: relaxed atomics are enough,
// a maximum of samples needs no order between them.
std::atomic<int64_t> heap_peak{-1};

void sample_heap() {
  int64_t now = remat_heap_bytes_in_use();
  int64_t seen = heap_peak.load(std::memory_order_relaxed);
  while (now > seen &&
         !heap_peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

// Before a node runs: its incoming gradients exist, and (for a node whose
// saved tensors a checkpoint rebuilt) the replay's values too.
struct HeapPreHook : torch::autograd::FunctionPreHook {
  variable_list operator()(const variable_list& grads) override {
    sample_heap();
    return grads;
  }
};

// After a node runs: its outgoing gradients exist before the engine hands
// them on and the node's inputs may be freed.
struct HeapPostHook : torch::autograd::FunctionPostHook {
  variable_list operator()(const variable_list& outputs,
                           const variable_list& /*inputs*/) override {
    sample_heap();
    return outputs;
  }
};

}  // namespace

namespace remat_bridge {

at::Tensor make_placeholder(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                            int64_t storage_offset, c10::ScalarType dtype,
                            c10::Device device, int64_t nbytes,
                            const std::string& message) {
  TORCH_CHECK(nbytes >= 0, "placeholder byte size must be >= 0");
  c10::DataPtr data(nullptr, &g_placeholder_tag, &placeholder_delete, device);
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), c10::SymInt(nbytes),
      std::move(data), nullptr, false);
  storage->release_data_and_set_meta_custom_data_ptr_error_msg_(message);
  auto key = c10::computeDispatchKey(dtype, c10::kStrided, device);
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(std::move(storage)), c10::DispatchKeySet(key),
      c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides,
                                                  storage_offset);
  return t;
}

bool is_placeholder(const at::Tensor& t) {
  c10::StorageImpl* s = storage_of(&t);
  return s != nullptr &&
         s->_mutable_data_ptr_no_checks().get_context() == &g_placeholder_tag;
}

}  // namespace remat_bridge

extern "C" {

// For cuda_diag.cpp, the other translation unit.
const remat_callbacks* remat_internal_callbacks(void) { return &g_cb; }

void remat_bridge_init(const remat_callbacks* callbacks) {
  static std::once_flag once;
  std::call_once(once, [&] {
    g_cb = *callbacks;
    torch::autograd::set_default_engine_stub(remat_engine);
  });
}

void remat_string_free(char* s) { std::free(s); }

void remat_error_set(void* err, const char* msg, size_t len) {
  static_cast<std::string*>(err)->assign(msg, len);
}

remat_err remat_fn_apply(void* ctx, const char* name,
                         const remat_tensor* const* inputs, size_t n_inputs,
                         remat_tensor** outputs, size_t n_outputs,
                         const remat_tensor* const* saved, size_t n_saved,
                         int* attached) {
  *attached = 0;
  return guard([&] {
    variable_list ins;
    ins.reserve(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i) {
      ins.push_back(inputs[i] != nullptr ? *inputs[i] : at::Tensor());
    }
    if (!c10::GradMode::is_enabled() ||
        !torch::autograd::any_variable_requires_grad(ins)) {
      return;
    }
    std::vector<const c10::TensorImpl*> raw_impls(n_outputs);
    for (size_t i = 0; i < n_outputs; ++i) {
      TORCH_CHECK(outputs[i] != nullptr && outputs[i]->defined(),
                  "output ", i, " of custom function '", name,
                  "' is not a defined tensor");
      raw_impls[i] = outputs[i]->unsafeGetTensorImpl();
    }
    auto node = make_node<RustNode>(
        ctx, name, torch::autograd::collect_next_edges(ins));
    *attached = 1;  // the node owns ctx now, even if what follows throws
    for (size_t i = 0; i < n_outputs; ++i) {
      at::Tensor raw = *outputs[i];
      auto nr = node->add_input_metadata(raw);
      *outputs[i] = torch::autograd::make_variable(raw, Edge(node, nr));
    }
    node->saved_.reserve(n_saved);
    for (size_t s = 0; s < n_saved; ++s) {
      const at::Tensor& t = *saved[s];
      bool saved_output = false;
      for (size_t i = 0; i < n_outputs; ++i) {
        if (t.unsafeGetTensorImpl() == raw_impls[i]) {
          // Saved as an output: no strong reference back to the node.
          node->saved_.emplace_back(*outputs[i], true);
          saved_output = true;
          break;
        }
      }
      if (!saved_output) {
        node->saved_.emplace_back(t, false);
      }
    }
  });
}

remat_err remat_node_saved(void* node, size_t i, remat_tensor** out) {
  return guard([&] {
    auto* n = static_cast<RustNode*>(node);
    *out = new at::Tensor(n->unpack_saved(i));
  });
}

remat_err remat_grad_fn_saved(const remat_tensor* tensor, size_t i,
                              remat_tensor** out) {
  return guard([&] {
    auto fn = tensor->grad_fn();
    auto* node = dynamic_cast<RustNode*>(fn.get());
    TORCH_CHECK(node != nullptr,
                "the tensor's grad_fn is not a remat custom function");
    *out = new at::Tensor(node->unpack_saved(i));
  });
}

remat_err remat_served_value(const remat_tensor* t, remat_tensor** out) {
  return guard([&] {
    at::Tensor data = t->tensor_data();
    auto node = make_node<ServedNode>();
    auto nr = node->add_input_metadata(data);
    *out = new at::Tensor(torch::autograd::make_variable(data, Edge(node, nr)));
  });
}

remat_err remat_detached_alias(const remat_tensor* t, remat_tensor** out) {
  return guard([&] { *out = new at::Tensor(t->tensor_data()); });
}

remat_err remat_hooks_push(void* hooks) {
  return guard([&] { t_hook_stack.push_back(std::make_shared<HookPair>(hooks)); });
}

remat_err remat_hooks_pop(void) {
  return guard([&] {
    TORCH_CHECK(!t_hook_stack.empty(),
                "saved-tensor hooks popped more often than pushed");
    t_hook_stack.pop_back();
  });
}

size_t remat_hooks_depth(void) { return t_hook_stack.size(); }

remat_err remat_placeholder_new(const int64_t* sizes, const int64_t* strides,
                                size_t ndim, int64_t storage_offset,
                                int scalar_type, int device, int64_t nbytes,
                                const char* msg, remat_tensor** out) {
  return guard([&] {
    *out = new at::Tensor(remat_bridge::make_placeholder(
        c10::IntArrayRef(sizes, ndim), c10::IntArrayRef(strides, ndim),
        storage_offset, static_cast<c10::ScalarType>(scalar_type),
        device_from_int(device), nbytes, std::string(msg)));
  });
}

namespace {

// A tensor without autograd history over `storage`, with the given layout
// and dtype, sharing `version` with every other view of the storage: an
// in-place change through any of them shows (rules S2, P2).
at::Tensor alias_over(const c10::Storage& storage,
                      const c10::VariableVersion& version,
                      const int64_t* sizes, const int64_t* strides, size_t ndim,
                      int64_t storage_offset, int scalar_type) {
  auto st = static_cast<c10::ScalarType>(scalar_type);
  auto key = c10::computeDispatchKey(st, c10::kStrided, storage.device());
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(key),
      c10::scalarTypeToTypeMeta(st));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(
      c10::IntArrayRef(sizes, ndim), c10::IntArrayRef(strides, ndim),
      storage_offset);
  torch::autograd::impl::set_version_counter(t, version);
  return t;
}

// A value kept for replay as its storage and version counter: two counted
// references in one small allocation, where a detached alias is a whole
// TensorImpl made on the forward and destroyed after backward. The alias
// is made only when a replay serves it, from the output's recorded layout.
struct KeptValue {
  c10::Storage storage;
  c10::VariableVersion version;
};

// Whether `alias_over` gives back exactly `t` (without its history): a
// dense strided tensor whose dispatch keys are its backend's, autograd's
// and autocast's only (no conjugate or negative bit, no wrapper), not an
// inference tensor, not quantized (its scale lives in a TensorImpl
// subclass), not a placeholder. Anything else is kept as a detached alias.
bool rebuilt_from_storage(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.layout() != c10::kStrided ||
      t.is_inference() || t.is_quantized() || remat_bridge::is_placeholder(t)) {
    return false;
  }
  // Every tensor's keys include its backend's autograd and autocast keys,
  // which a new TensorImpl adds itself.
  c10::DispatchKeySet own(
      c10::computeDispatchKey(t.scalar_type(), c10::kStrided, t.device()));
  auto rest = t.key_set() - c10::autograd_dispatch_keyset_with_ADInplaceOrView -
              c10::getAutocastRelatedKeySetFromBackend(own.highestBackendKey());
  return rest == own;
}

KeptValue* keep_value(const at::Tensor& t, uint32_t* version) {
  const auto& counter = torch::autograd::impl::version_counter(t);
  *version = counter.current_version();
  return new KeptValue{t.storage(), counter};
}

}  // namespace

remat_err remat_alias_with_layout(const remat_tensor* of, const int64_t* sizes,
                                  const int64_t* strides, size_t ndim,
                                  int64_t storage_offset, int scalar_type,
                                  remat_tensor** out) {
  return guard([&] {
    TORCH_CHECK(of->defined() && of->has_storage(),
                "an alias needs a tensor with a storage");
    *out = new at::Tensor(alias_over(of->storage(),
                                     torch::autograd::impl::version_counter(*of),
                                     sizes, strides, ndim, storage_offset,
                                     scalar_type));
  });
}


int remat_is_placeholder(const remat_tensor* t) {
  return t != nullptr && remat_bridge::is_placeholder(*t);
}

remat_err remat_tensor_meta(const remat_tensor* t, remat_meta* out) {
  *out = remat_meta{};
  return guard([&] {
    if (!t->defined()) {
      return;
    }
    c10::StorageImpl* s = storage_of(t);
    out->storage_key = reinterpret_cast<uintptr_t>(s);
    out->storage_nbytes = s == nullptr ? 0 : static_cast<int64_t>(s->nbytes());
    out->is_placeholder =
        s != nullptr &&
        s->_mutable_data_ptr_no_checks().get_context() == &g_placeholder_tag;
    out->scalar_type = static_cast<int32_t>(t->scalar_type());
    auto device = t->device();
    switch (device.type()) {
      case at::kCPU: out->device = -1; break;
      case at::kVulkan: out->device = -3; break;
      case at::kCUDA: out->device = device.index(); break;
      default: out->device = -2; break;
    }
    out->requires_grad = t->requires_grad();
    try {
      out->version = torch::autograd::impl::version_counter(*t).current_version();
      out->has_version = 1;
    } catch (const c10::Error&) {
      out->has_version = 0;
    }
    out->storage_offset = t->storage_offset();
    auto sizes = t->sizes();
    out->ndim = sizes.size();
    if (sizes.size() <= REMAT_META_DIMS) {
      auto strides = t->strides();
      for (size_t i = 0; i < sizes.size(); ++i) {
        out->sizes[i] = sizes[i];
        out->strides[i] = strides[i];
      }
    }
  });
}

int remat_is_grad_leaf(const remat_tensor* t) {
  return t->defined() && t->requires_grad() && t->is_leaf();
}

uintptr_t remat_storage_key(const remat_tensor* t) {
  return reinterpret_cast<uintptr_t>(storage_of(t));
}

int64_t remat_storage_nbytes(const remat_tensor* t) {
  c10::StorageImpl* s = storage_of(t);
  return s == nullptr ? 0 : static_cast<int64_t>(s->nbytes());
}

int64_t remat_storage_offset(const remat_tensor* t) {
  return t->defined() ? t->storage_offset() : 0;
}

// Weak handles are the target's raw pointer owning one weak count (what
// `weak_intrusive_ptr::release` gives): no heap cell per handle, and a
// storage handle's value is its key.
using WeakStorageImpl = c10::weak_intrusive_ptr<c10::StorageImpl>;
using WeakTensorImpl =
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

void* remat_storage_weak_new(const remat_tensor* t) {
  if (storage_of(t) == nullptr) {
    return nullptr;
  }
  return t->storage().getWeakStorageImpl().release();
}

int remat_storage_weak_alive(const void* weak) {
  auto w = WeakStorageImpl::reclaim(
      static_cast<c10::StorageImpl*>(const_cast<void*>(weak)));
  bool alive = !w.expired();
  w.release();
  return alive;
}

void remat_storage_weak_free(void* weak) {
  WeakStorageImpl::reclaim(static_cast<c10::StorageImpl*>(weak));
}

void* remat_tensor_weak_new(const remat_tensor* t) {
  if (!t->defined()) {
    return nullptr;
  }
  return WeakTensorImpl(t->getIntrusivePtr()).release();
}

remat_tensor* remat_tensor_weak_upgrade(const void* weak) {
  auto w = WeakTensorImpl::reclaim(
      static_cast<c10::TensorImpl*>(const_cast<void*>(weak)));
  auto strong = w.lock();
  w.release();
  if (!strong) {
    return nullptr;
  }
  return new at::Tensor(std::move(strong));
}

void remat_tensor_weak_free(void* weak) {
  WeakTensorImpl::reclaim(static_cast<c10::TensorImpl*>(weak));
}

remat_err remat_kept_new(const remat_tensor* t, void** out, uint32_t* version) {
  *out = nullptr;
  return guard([&] {
    if (rebuilt_from_storage(*t)) {
      *out = keep_value(*t, version);
    }
  });
}

remat_err remat_kept_from_weak(const void* weak, void** out, uint32_t* version,
                               remat_tensor** live) {
  *out = nullptr;
  *live = nullptr;
  return guard([&] {
    auto w = WeakTensorImpl::reclaim(
        static_cast<c10::TensorImpl*>(const_cast<void*>(weak)));
    auto strong = w.lock();
    w.release();
    if (!strong) {
      return;
    }
    at::Tensor t(std::move(strong));
    if (rebuilt_from_storage(t)) {
      *out = keep_value(t, version);
    } else {
      *live = new at::Tensor(std::move(t));
    }
  });
}

remat_err remat_kept_clone(const void* kept, void** out) {
  *out = nullptr;
  return guard([&] { *out = new KeptValue(*static_cast<const KeptValue*>(kept)); });
}

uint32_t remat_kept_version(const void* kept) {
  return static_cast<const KeptValue*>(kept)->version.current_version();
}

remat_err remat_kept_tensor(const void* kept, const int64_t* sizes,
                            const int64_t* strides, size_t ndim,
                            int64_t storage_offset, int scalar_type,
                            remat_tensor** out) {
  *out = nullptr;
  return guard([&] {
    const auto* k = static_cast<const KeptValue*>(kept);
    *out = new at::Tensor(alias_over(k->storage, k->version, sizes, strides,
                                     ndim, storage_offset, scalar_type));
  });
}

void remat_kept_free(void* kept) { delete static_cast<KeptValue*>(kept); }

remat_err remat_version(const remat_tensor* t, uint32_t* out) {
  return guard([&] {
    *out = torch::autograd::impl::version_counter(*t).current_version();
  });
}

remat_err remat_version_counter_new(const remat_tensor* t, void** out) {
  return guard([&] {
    *out = new c10::VariableVersion(torch::autograd::impl::version_counter(*t));
  });
}

uint32_t remat_version_counter_get(const void* counter) {
  return static_cast<const c10::VariableVersion*>(counter)->current_version();
}

void remat_version_counter_free(void* counter) {
  delete static_cast<c10::VariableVersion*>(counter);
}

int remat_grad_mode_enabled(void) { return c10::GradMode::is_enabled(); }

void remat_grad_mode_set(int enabled) { c10::GradMode::set_enabled(enabled != 0); }

void* remat_untracked_push(void) {
  try {
    return new at::AutoDispatchBelowADInplaceOrView();
  } catch (...) {
    return nullptr;
  }
}

void remat_untracked_pop(void* guard) {
  delete static_cast<at::AutoDispatchBelowADInplaceOrView*>(guard);
}

int remat_graph_task_id(void) {
  return torch::autograd::get_current_graph_task_id();
}

int remat_graph_task_keep_graph(void) {
  if (torch::autograd::get_current_graph_task_id() < 0) {
    return 0;
  }
  return torch::autograd::get_current_graph_task_keep_graph();
}

int64_t remat_heap_bytes_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

int remat_is_parameter(const remat_tensor* t) { return is_parameter(*t); }

remat_err remat_heap_watch(const remat_tensor* const* roots, size_t n_roots) {
  return guard([&] {
    for_each_node(roots, n_roots, [](Node* node) {
      node->add_pre_hook(std::make_unique<HeapPreHook>());
      node->add_post_hook(std::make_unique<HeapPostHook>());
    });
  });
}

void remat_heap_peak_reset(void) {
  heap_peak.store(remat_heap_bytes_in_use(), std::memory_order_relaxed);
}

int64_t remat_heap_peak(void) {
  return heap_peak.load(std::memory_order_relaxed);
}


remat_err remat_rng_get_state(int device, remat_tensor** out) {
  return guard([&] {
    at::Generator gen = default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    *out = new at::Tensor(gen.get_state());
  });
}

remat_err remat_rng_set_state(int device, const remat_tensor* state) {
  return guard([&] {
    at::Generator gen = default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*state);
  });
}

remat_err remat_backward(const remat_tensor* loss, int keep_graph) {
  return guard([&] {
    torch::autograd::backward({*loss}, {}, keep_graph != 0, false);
  });
}

remat_err remat_graph_nodes(const remat_tensor* const* roots, size_t n_roots,
                            char** out) {
  *out = nullptr;
  return guard([&] {
    std::ostringstream lines;
    for_each_node(roots, n_roots, [&](Node* node) {
      lines << node->thread_id() << ' ' << node->sequence_nr() << ' '
            << node->name() << '\n';
    });
    *out = dup_string(lines.str().c_str());
  });
}

uintptr_t remat_storage_data(const remat_tensor* t) {
  c10::StorageImpl* s = storage_of(t);
  if (s == nullptr) {
    return 0;
  }
  return reinterpret_cast<uintptr_t>(s->_mutable_data_ptr_no_checks().get());
}

#ifndef REMAT_CUDA
// CPU builds: the CUDA diagnostics live in cuda_diag.cpp, compiled only with
// the `cuda` feature (it needs the CUDA headers and libc10_cuda).
namespace {
remat_err no_cuda() {
  return dup_string(
      "this build of remat has no CUDA diagnostics: build with the `cuda` "
      "feature (remat/cuda) where the CUDA toolkit headers are found "
      "(CUDA_HOME), and run on a machine with a CUDA device");
}
}  // namespace

int remat_cuda_built(void) { return 0; }
remat_err remat_cuda_attach_oom_observer(void) { return no_cuda(); }
remat_err remat_cuda_record_contexts(int /*enabled*/) { return no_cuda(); }
remat_err remat_cuda_blocks(char** out) {
  *out = nullptr;
  return no_cuda();
}
remat_err remat_cuda_copy_out(const remat_tensor* /*src*/, remat_tensor** out,
                              void** event) {
  *out = nullptr;
  *event = nullptr;
  return no_cuda();
}
remat_err remat_cuda_copy_back(const remat_tensor* /*host*/, int /*device*/,
                               void* /*after*/, remat_tensor** out,
                               void** event) {
  *out = nullptr;
  *event = nullptr;
  return no_cuda();
}
remat_err remat_cuda_use(const remat_tensor* /*t*/, void* /*event*/) {
  return no_cuda();
}
void remat_cuda_event_free(void* /*event*/) {}
remat_err remat_cuda_memory_stats(int /*device*/, int64_t* /*out*/) {
  return no_cuda();
}
remat_err remat_cuda_reset_peak(int /*device*/) { return no_cuda(); }
remat_err remat_cuda_use_stream(int /*device*/, int /*side*/, int64_t* id) {
  *id = 0;
  return no_cuda();
}
remat_err remat_cuda_current_stream(int /*device*/, int64_t* id) {
  *id = 0;
  return no_cuda();
}
#endif

remat_err remat_set_deterministic_algorithms(int enabled) {
  return guard([&] {
    at::globalContext().setDeterministicAlgorithms(enabled != 0,
                                                   /*warn_only=*/false);
  });
}

}  // extern "C"
