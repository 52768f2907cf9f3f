// Early stop without unwinding (docs/semantics.md, rules C17 and C19).
//
// A recomputation is done once it has refilled the last holder backward
// still reads, which happens inside an op: its autograd kernel saves its
// inputs, the last one completes the rebuild, and the op would then compute
// a result nobody reads. While a recomputation that may stop runs its last
// ops (from the save before the stopping op's first: `remat_stop_activate`,
// or from its start), every ATen op on its thread passes through a
// dispatcher fallback on a mode key above autograd and autocast (`arm`).
// When the replay's pack hook reports
// the stop, libtorch raises it out of the op's autograd kernel, and the
// fallback catches it right there, in C++, one frame above the op: the op
// then "runs dry" and returns placeholders (rule P4) with the metadata it
// would have given, computed on the meta device. From then on, the thread is
// dry: an op with a placeholder among its inputs runs dry too (so everything
// computed from the stopped op's result costs nothing), every other op runs
// as usual. The user's closure sees ordinary return values, keeps running
// to its end and returns normally: no unwinding crosses its frames.
//
// What a dry op does, by its schema:
// - a view (a return aliasing an input, not written) runs for real, with
//   the key still included: a view of a placeholder is a placeholder, and
//   what a composite that may copy (`to`, `reshape`) is made of comes back
//   here and runs dry;
// - an in-place or out= op (a return aliasing a written argument) changes
//   nothing and returns that argument;
// - an op returning no tensor (a read: `item`, `equal`) runs for real, so a
//   read of a placeholder fails with the placeholder's message;
// - any other op is computed on the meta device from meta copies of its
//   arguments (so written arguments stay untouched) and returns placeholders
//   of the meta results' layouts on the arguments' device. An op without a
//   meta kernel fails with a message naming it, unless it is the op the
//   stop was raised in, whose arguments are all live: that one runs for
//   real.
//
// Invariants: the fallback runs each live op with its key excluded, so the
// ops a live op makes inside (a composite's parts, a pack hook's own ops)
// never reach it again: one frame per op the closure calls, the frame that
// catches. Only dry ops let their parts come back (to run dry too). The
// thread's stop state is saved by `remat_stop_arm` and put back by
// `remat_stop_disarm`, so a recomputation nested in another (a backward
// inside the closure) leaves the outer one's as it found it.

#include "bridge.h"
#include "guard.h"
#include "placeholder.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// The mode key the fallback sits on. libtorch leaves it to an out-of-tree
// library (torchdistx's deferred module initialisation), which a process
// that links libtorch without Python never loads; it sits above autograd
// and autocast, which the catching frame must enclose. If some library did
// register it, `remat_stop_available` says no and recomputation runs whole.
constexpr c10::DispatchKey kKey = c10::DispatchKey::DeferredInit;

enum class Stop : uint8_t { Off, Armed, Dry };

struct StopState {
  Stop state = Stop::Off;
  bool key_was_included = false;
  // How many ops the fallback is running for the armed recomputation (the
  // frames that catch a stop raised inside them).
  int frames = 0;
  // The stop was reached inside the running op without ending it: its
  // results are made dry when it returns.
  bool dry_results = false;
  // What a read of a dry placeholder says, and what an op without a meta
  // kernel says (its `{op}` replaced by the op's name).
  std::string read_message;
  std::string no_meta_message;
};

thread_local StopState t_stop;

// The names of the ops that ran dry on this thread, while a caller of
// `remat_dry_log_begin` collects them (docs/performance.md's breakdown).
thread_local std::vector<std::string>* t_dry_log = nullptr;

void log_dry(const c10::OperatorHandle& op) {
  if (t_dry_log != nullptr) {
    const c10::OperatorName& name = op.schema().operator_name();
    t_dry_log->push_back(name.overload_name.empty()
                             ? name.name
                             : name.name + "." + name.overload_name);
  }
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
              torch::jit::Stack* stack);

bool registered() {
  static const bool ok = [] {
    try {
      static c10::RegistrationHandleRAII handle =
          c10::Dispatcher::singleton().registerFallback(
              kKey, c10::KernelFunction::makeFromBoxedFunction<&fallback>(),
              "remat: early stop of a recomputation");
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return ok;
}

bool any_placeholder(const c10::IValue& v) {
  if (v.isTensor()) {
    return remat_bridge::is_placeholder(v.toTensor());
  }
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (remat_bridge::is_placeholder(t)) {
        return true;
      }
    }
    return false;
  }
  if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value() && remat_bridge::is_placeholder(*t)) {
        return true;
      }
    }
  }
  return false;
}

bool has_placeholder(const torch::jit::Stack& stack, size_t n) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (any_placeholder(stack[i])) {
      return true;
    }
  }
  return false;
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  return at::empty_strided(t.sizes(), t.strides(),
                           t.options().device(c10::kMeta));
}

// What the op's arguments become on the meta device; `device` learns where
// the real results would live (the first tensor's device, or a device the
// op is given).
c10::IValue meta_argument(const c10::IValue& v,
                          std::optional<c10::Device>& device) {
  auto note = [&](const at::Tensor& t) {
    if (!device.has_value() && t.defined()) {
      device = t.device();
    }
  };
  if (v.isTensor()) {
    note(v.toTensor());
    return to_meta(v.toTensor());
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) {
      note(t);
      out.push_back(to_meta(t));
    }
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value()) {
        note(*t);
        out.push_back(to_meta(*t));
      } else {
        out.push_back(std::nullopt);
      }
    }
    return out;
  }
  if (v.isDevice()) {
    device = v.toDevice();
    return c10::Device(c10::kMeta);
  }
  return v;
}

// A placeholder of `like`'s layout on `device`, saying what a dry
// placeholder says; `like` may be a meta tensor.
at::Tensor placeholder_of(const at::Tensor& like, c10::Device device,
                          bool requires_grad) {
  if (!like.defined() || !like.has_storage()) {
    return like;
  }
  at::Tensor out = remat_bridge::make_placeholder(
      like.sizes(), like.strides(), like.storage_offset(), like.scalar_type(),
      device, static_cast<int64_t>(like.storage().nbytes()),
      t_stop.read_message);
  if (requires_grad && (at::isFloatingType(like.scalar_type()) ||
                        at::isComplexType(like.scalar_type()))) {
    out.set_requires_grad(true);
  }
  return out;
}

// `v` with each tensor it holds (alone or in a list) replaced by `f`'s.
template <typename F>
c10::IValue map_tensors(const c10::IValue& v, F f) {
  if (v.isTensor()) {
    return f(v.toTensor());
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) {
      out.push_back(f(t));
    }
    return out;
  }
  return v;
}

// A result of a dry op: placeholders of the meta results' layouts.
c10::IValue placeholder_result(const c10::IValue& v, c10::Device device,
                               bool requires_grad) {
  return map_tensors(v, [&](const at::Tensor& meta) {
    return placeholder_of(meta, device, requires_grad);
  });
}

bool any_requires_grad(const std::vector<c10::IValue>& args) {
  if (!c10::GradMode::is_enabled()) {
    return false;
  }
  for (const c10::IValue& v : args) {
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().requires_grad()) {
      return true;
    }
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        if (t.defined() && t.requires_grad()) {
          return true;
        }
      }
    }
  }
  return false;
}

// The argument a return aliases, if the schema says it does.
std::optional<size_t> aliased_argument(const c10::FunctionSchema& schema,
                                       const c10::AliasInfo& ret) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::AliasInfo* a = arguments[i].alias_info();
    if (a != nullptr && a->beforeSets() == ret.beforeSets()) {
      return i;
    }
  }
  return std::nullopt;
}

std::string no_meta_message(const c10::OperatorHandle& op) {
  std::string message = t_stop.no_meta_message;
  const std::string name = op.schema().operator_name().name;
  auto at = message.find("{op}");
  if (at != std::string::npos) {
    message.replace(at, 4, name);
  }
  return message;
}

// The op, dry: see the file's comment for what each kind of op does.
void run_dry(const c10::OperatorHandle& op, c10::DispatchKeySet after,
             torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  bool any_tensor_return = false;
  bool view = false;
  for (const c10::Argument& r : schema.returns()) {
    const c10::TypePtr& type = r.type();
    any_tensor_return |= type->kind() == c10::TypeKind::TensorType ||
                         type->isSubtypeOf(*c10::ListType::ofTensors());
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite() &&
        !schema.is_mutable()) {
      view = true;
    }
  }
  if (!any_tensor_return || view) {
    // With the key still included, so that what it is made of comes back
    // here: `to` and `reshape` alias or copy, and a copy of a placeholder
    // runs dry.
    op.redispatchBoxed(after, stack);
    return;
  }
  log_dry(op);
  std::vector<c10::IValue> args = torch::jit::pop(*stack, n);
  std::optional<c10::Device> device;
  torch::jit::Stack meta;
  meta.reserve(n);
  for (const c10::IValue& v : args) {
    meta.push_back(meta_argument(v, device));
  }
  try {
    c10::impl::ExcludeDispatchKeyGuard below(kKey);
    c10::AutoGradMode no_grad(false);
    op.callBoxed(meta);
  } catch (const std::exception&) {
    TORCH_CHECK(false, no_meta_message(op));
  }
  const bool requires_grad = any_requires_grad(args);
  const auto& returns = schema.returns();
  for (size_t j = 0; j < returns.size(); ++j) {
    const c10::AliasInfo* alias = returns[j].alias_info();
    std::optional<size_t> written =
        alias != nullptr && alias->isWrite() ? aliased_argument(schema, *alias)
                                             : std::nullopt;
    if (written.has_value()) {
      stack->push_back(args[*written]);
    } else {
      stack->push_back(placeholder_result(meta[j], device.value_or(c10::kCPU),
                                          requires_grad));
    }
  }
}

// A placeholder of `t` itself: its layout, device and `requires_grad`.
at::Tensor dry_copy(const at::Tensor& t) {
  return t.defined() ? placeholder_of(t, t.device(), t.requires_grad()) : t;
}

c10::IValue dry_copy_of(const c10::IValue& v) { return map_tensors(v, dry_copy); }

// Whether autocast recasts the op's arguments on this thread: then the dry
// op goes through autocast's kernel, whose casts and inner call come back
// here and run dry, so its placeholders get the dtypes autocast gives.
bool autocast_recasts(const c10::OperatorHandle& op, c10::DispatchKeySet after) {
  for (c10::DispatchKey key :
       {c10::DispatchKey::AutocastCPU, c10::DispatchKey::AutocastCUDA}) {
    if (after.has(key) && op.hasKernelForDispatchKey(key)) {
      return true;
    }
  }
  return false;
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
              torch::jit::Stack* stack) {
  const c10::DispatchKeySet after =
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kKey);
  const size_t n = op.schema().arguments().size();
  if (t_stop.state == Stop::Dry && has_placeholder(*stack, n)) {
    if (autocast_recasts(op, after)) {
      op.redispatchBoxed(after, stack);
      return;
    }
    run_dry(op, after, stack);
    return;
  }
  if (t_stop.state != Stop::Armed) {
    // What the op makes inside never comes back here (the file's invariant).
    c10::impl::ExcludeDispatchKeyGuard below(kKey);
    op.redispatchBoxed(after, stack);
    return;
  }
  // The op may be the one whose save stops the recomputation: its
  // arguments are kept so that it can run dry once the stop is raised.
  const size_t base = stack->size() - n;
  c10::SmallVector<c10::IValue, 8> args(stack->begin() + base, stack->end());
  struct Frame {
    Frame() { ++t_stop.frames; }
    ~Frame() { --t_stop.frames; }
  };
  try {
    // Both guards are gone by the time the handler runs.
    c10::impl::ExcludeDispatchKeyGuard below(kKey);
    Frame frame;
    op.redispatchBoxed(after, stack);
  } catch (...) {
    t_stop.dry_results = false;
    if (t_stop.state != Stop::Dry) {
      throw;
    }
    stack->erase(stack->begin() + base, stack->end());
    for (const c10::IValue& v : args) {
      stack->push_back(v);
    }
    if (autocast_recasts(op, after)) {
      // On placeholders of its arguments, its casts and inner call come
      // back here and run dry.
      log_dry(op);
      for (size_t i = base; i < stack->size(); ++i) {
        (*stack)[i] = dry_copy_of((*stack)[i]);
      }
      op.redispatchBoxed(after, stack);
      return;
    }
    try {
      run_dry(op, after, stack);
    } catch (...) {
      // No meta kernel: its arguments are live, so it runs for real (its
      // saves, after the stop, fill no holder).
      stack->erase(stack->begin() + base, stack->end());
      for (c10::IValue& v : args) {
        stack->push_back(std::move(v));
      }
      c10::impl::ExcludeDispatchKeyGuard below(kKey);
      op.redispatchBoxed(after, stack);
    }
    return;
  }
  if (t_stop.dry_results) {
    // It computed (ending it would have cost more than it saves), but
    // what follows from its results runs dry.
    t_stop.dry_results = false;
    const size_t returns = op.schema().returns().size();
    for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
      (*stack)[i] = dry_copy_of((*stack)[i]);
    }
  }
}

}  // namespace

extern "C" {

int remat_stop_available(void) { return registered() ? 1 : 0; }

void* remat_stop_arm(const char* read_message, size_t read_len,
                     const char* no_meta_message, size_t no_meta_len,
                     int active) {
  if (!registered()) {
    return nullptr;
  }
  try {
    StopState armed;
    armed.state = Stop::Armed;
    armed.read_message.assign(read_message, read_len);
    armed.no_meta_message.assign(no_meta_message, no_meta_len);
    auto* previous = new StopState(std::move(t_stop));
    previous->key_was_included = c10::impl::tls_is_dispatch_key_included(kKey);
    t_stop = std::move(armed);
    if (active != 0) {
      c10::impl::tls_set_dispatch_key_included(kKey, true);
    }
    return previous;
  } catch (...) {
    return nullptr;  // out of memory: the recomputation runs whole
  }
}

void remat_stop_activate(void) {
  if (t_stop.state == Stop::Armed) {
    c10::impl::tls_set_dispatch_key_included(kKey, true);
  }
}

void remat_stop_disarm(void* previous) {
  auto* state = static_cast<StopState*>(previous);
  c10::impl::tls_set_dispatch_key_included(kKey, state->key_was_included);
  t_stop = std::move(*state);
  delete state;
}

int remat_stop_now(int end_op) {
  if (t_stop.state != Stop::Armed) {
    return 0;
  }
  t_stop.state = Stop::Dry;
  if (t_stop.frames == 0) {
    return 0;
  }
  if (end_op != 0) {
    return 1;
  }
  t_stop.dry_results = true;
  return 0;
}

remat_err remat_stop_dry_copy(const remat_tensor* t, remat_tensor** out) {
  *out = nullptr;
  return remat_bridge::guard([&] {
    if (t_stop.state != Stop::Dry || !t->defined() || !t->has_storage()) {
      return;
    }
    *out = new at::Tensor(dry_copy(*t));
  });
}

int remat_stop_is_dry(void) { return t_stop.state == Stop::Dry ? 1 : 0; }

void remat_dry_log_begin(void) {
  delete t_dry_log;
  t_dry_log = new std::vector<std::string>();
}

char* remat_dry_log_end(void) {
  std::string joined;
  if (t_dry_log != nullptr) {
    for (const std::string& name : *t_dry_log) {
      joined += name;
      joined += '\n';
    }
    delete t_dry_log;
    t_dry_log = nullptr;
  }
  return remat_bridge::dup_string(joined.c_str());
}

}  // extern "C"
