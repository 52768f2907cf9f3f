// remat_distributed's sharded units (docs/semantics.md, section F): each
// unit's parameters live in one flat buffer whose storage exists only while
// the unit is gathered; between uses a rank holds its shard alone. The
// gathers, the reduce-scatters and the hooks that time them run here, on
// c10d's collectives; no Rust code is called from C++.
//
// Why the storage and not the tensors: autograd saves a parameter (or a
// view of it, `w.t()`) by reference. Freeing the buffer's bytes, and
// putting them back before the unit's backward, keeps every saved view
// valid without touching a version counter (rule F3).
#include "dist.h"
#include "group.h"
#include "guard.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using remat_bridge::guard;

namespace {

using Clock = std::chrono::steady_clock;
using NodeHandle =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// What the event log records (read by Rust as FsdpEvent).
enum Event : int64_t {
  kGatherLaunch = 0,
  kGatherDone = 1,
  kForwardStart = 2,
  kForwardEnd = 3,
  kBackwardStart = 4,
  kReduceLaunch = 5,
  kReduceDone = 6,
  kFreed = 7,
  kPrefetch = 8,
};

struct Unit {
  std::string name;
  std::vector<std::string> param_names;
  std::vector<at::Tensor> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  int64_t padded = 0;
  int64_t shard_len = 0;
  // The flat buffer the parameters view; its storage holds bytes only
  // while the unit is gathered.
  at::Tensor full;
  // This rank's slice of the flat buffer: the optimizer's parameter, in
  // the parameters' own dtype, on the CPU when offloaded (rule F8).
  at::Tensor shard;
  // The dtype gradients are summed in.
  at::ScalarType reduce_dtype = at::kFloat;
  bool gathered = false;
  c10::intrusive_ptr<c10d::Work> gather_work;
  // This backward: whether its outputs' gradients arrived, how many
  // parameters reported a gradient, whether the reduce-scatter started.
  bool in_backward = false;
  size_t reported = 0;
  bool reduced = false;
  at::Tensor rs_in;
  at::Tensor rs_out;
  c10::intrusive_ptr<c10d::Work> rs_work;
  std::vector<std::pair<NodeHandle, uintptr_t>> hooks;
};

struct Log {
  std::mutex m;
  Clock::time_point epoch = Clock::now();
  std::vector<std::array<int64_t, 3>> events;

  void add(Event kind, size_t unit) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch).count();
    std::lock_guard<std::mutex> lock(m);
    events.push_back({kind, static_cast<int64_t>(unit), ns});
  }
};

struct State {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::chrono::milliseconds timeout{0};
  int rank = 0;
  int world = 1;
  bool reshard_after_forward = true;
  bool prefetch = true;
  // Rule F5: sum the ranks' shares in rank order (all-to-all, then a local
  // sum) instead of the backend's reduce-scatter, whose order is its own.
  bool rank_order = false;
  std::recursive_mutex m;
  std::vector<std::unique_ptr<Unit>> units;
  // Units in the order their forwards started, this step and the last
  // one (forward prefetch), and in the order they ended (backward prefetch).
  std::vector<size_t> started, started_last, ended;
  std::vector<size_t> reduce_order;
  // Whether a backward is running: its end-of-backward callback is queued.
  bool callback_queued = false;
  // The most bytes the units' buffers held at once during the last
  // backward (gathered or being gathered): what the planner adds to every
  // replay's working set (rule F9).
  size_t backward_peak = 0;
  // Written from Gloo's threads too: its own lock, never held while waiting.
  std::shared_ptr<Log> log = std::make_shared<Log>();
};

void set_bytes(const at::Tensor& t, size_t bytes) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s->nbytes() == bytes) {
    return;
  }
  if (bytes == 0) {
    s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
  } else {
    s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  }
  s->set_nbytes(bytes);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d > 1; --d) {
    strides[d - 2] = strides[d - 1] * std::max<int64_t>(shape[d - 1], 1);
  }
  return strides;
}

// The parameters take their shapes over the gathered buffer, or an empty
// shape while it holds no bytes, so that reading one between uses sees an
// empty tensor instead of freed memory. Metadata only: no version bump.
void show(Unit& u) {
  for (size_t k = 0; k < u.params.size(); ++k) {
    auto strides = contiguous_strides(u.shapes[k]);
    u.params[k].unsafeGetTensorImpl()->set_sizes_and_strides(
        c10::IntArrayRef(u.shapes[k]), c10::IntArrayRef(strides), u.offsets[k]);
  }
}

void hide(Unit& u) {
  const std::vector<int64_t> empty{0};
  const std::vector<int64_t> unit_stride{1};
  for (auto& p : u.params) {
    p.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef(empty),
                                                   c10::IntArrayRef(unit_stride), int64_t{0});
  }
}

size_t element_bytes(const Unit& u) { return u.full.element_size(); }

size_t gathered_now(const State& s) {
  size_t bytes = 0;
  for (auto& u : s.units) {
    bytes += u->full.storage().nbytes();
  }
  return bytes;
}

void launch_gather(State& s, size_t i, bool prefetch = false) {
  Unit& u = *s.units[i];
  if (u.gathered || u.gather_work) {
    return;
  }
  at::NoGradGuard no_grad;
  set_bytes(u.full, static_cast<size_t>(u.padded) * element_bytes(u));
  if (s.callback_queued) {  // a backward is running
    s.backward_peak = std::max(s.backward_peak, gathered_now(s));
  }
  c10d::AllgatherOptions opts;
  opts.timeout = s.timeout;
  // In the compute dtype, on the compute device (rule F8): a copy only when
  // either differs from the shard's.
  at::Tensor in = u.shard.detach().to(u.full.options());
  s.log->add(prefetch ? kPrefetch : kGatherLaunch, i);
  u.gather_work = s.pg->all_gather_single(u.full, in, opts);
  std::weak_ptr<Log> weak = s.log;
  u.gather_work->getFuture()->addCallback([weak, i](c10::ivalue::Future&) {
    if (auto log = weak.lock()) {
      log->add(kGatherDone, i);
    }
  });
}

void release(State& s, size_t i) {
  Unit& u = *s.units[i];
  if (u.gather_work) {
    auto work = std::move(u.gather_work);
    u.gather_work.reset();
    work->wait(s.timeout);
  }
  if (!u.gathered && u.full.storage().nbytes() == 0) {
    return;
  }
  hide(u);
  set_bytes(u.full, 0);
  u.gathered = false;
  s.log->add(kFreed, i);
}

void gather(State& s, size_t i) {
  Unit& u = *s.units[i];
  if (u.gathered) {
    return;
  }
  launch_gather(s, i);
  auto work = std::move(u.gather_work);
  u.gather_work.reset();
  try {
    work->wait(s.timeout);
  } catch (...) {
    set_bytes(u.full, 0);
    throw;
  }
  show(u);
  u.gathered = true;
}

// Rule F6: a unit's parameters are what it was built over, unchanged.
void check_unchanged(const Unit& u) {
  const c10::StorageImpl* own = u.full.storage().unsafeGetStorageImpl();
  for (size_t k = 0; k < u.params.size(); ++k) {
    const at::Tensor& p = u.params[k];
    bool ours = p.storage().unsafeGetStorageImpl() == own && p.dtype() == u.full.dtype();
    auto sizes = p.sizes().vec();
    bool shaped = sizes == u.shapes[k] || sizes == std::vector<int64_t>{0};
    if (!ours || !shaped) {
      std::ostringstream msg;
      msg << "sharded unit `" << u.name << "`: parameter `" << u.param_names[k]
          << "` was replaced or reshaped after the unit was sharded (now " << p.sizes()
          << ", sharded as " << c10::IntArrayRef(u.shapes[k])
          << "): a sharded unit's parameters keep their shapes and storage; change the model "
             "before building FullyShardedDataParallel, or build it again (docs/semantics.md, "
             "rule F6)";
      TORCH_CHECK(false, msg.str());
    }
  }
}

void launch_reduce(State& s, size_t i) {
  Unit& u = *s.units[i];
  at::NoGradGuard no_grad;
  auto reduce_options = u.full.options().dtype(u.reduce_dtype);
  at::Tensor flat = at::zeros({u.padded}, reduce_options);
  for (size_t k = 0; k < u.params.size(); ++k) {
    at::Tensor g = u.params[k].grad();
    if (g.defined()) {
      flat.narrow(0, u.offsets[k], g.numel()).copy_(g.reshape({-1}));
      u.params[k].mutable_grad().reset();
    }
  }
  // As the Reducer scales a bucket before its sum (rule W5): each rank's
  // share, then the sum, so that the mean has data parallel's bits.
  flat.mul_(1.0 / static_cast<double>(s.world));
  u.rs_in = flat;
  u.rs_out = at::empty({u.shard_len}, reduce_options);
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = s.timeout;
  s.log->add(kReduceLaunch, i);
  // Gloo's reduce-scatter has no future to time its completion by: it is
  // written down when the end of backward has waited for it.
  if (s.rank_order) {
    // Rank r receives every rank's share of its slice, in rank order.
    u.rs_out = at::empty({u.padded}, reduce_options);
    std::vector<int64_t> even;
    c10d::AllToAllOptions a2a;
    a2a.timeout = s.timeout;
    u.rs_work = s.pg->all_to_all_single(u.rs_out, u.rs_in, even, even, a2a);
  } else {
    u.rs_work = s.pg->reduce_scatter_single(u.rs_out, u.rs_in, opts);
  }
  u.reduced = true;
  s.reduce_order.push_back(i);
  // Rule F5: the unit's backward is over once every parameter reported.
  release(s, i);
}

// A unit's record of the backward that ends (or failed).
void forget_backward(Unit& u) {
  u.in_backward = false;
  u.reported = 0;
  u.reduced = false;
}

// End of a backward (rule F5): the units some of whose parameters reported
// reduce what they have, every reduce-scatter is waited for and lands in
// its shard's gradient, and every unit still gathered is freed.
void finish_backward(State& s) {
  s.callback_queued = false;
  for (size_t i = 0; i < s.units.size(); ++i) {
    Unit& u = *s.units[i];
    if (u.reported > 0 && !u.reduced) {
      launch_reduce(s, i);
    }
  }
  std::vector<size_t> order = std::move(s.reduce_order);
  s.reduce_order.clear();
  for (size_t i : order) {
    Unit& u = *s.units[i];
    auto work = std::move(u.rs_work);
    u.rs_work.reset();
    work->wait(s.timeout);
    s.log->add(kReduceDone, i);
    at::NoGradGuard no_grad;
    if (s.rank_order) {
      at::Tensor parts = u.rs_out.view({s.world, u.shard_len});
      at::Tensor sum = parts[0].clone();
      for (int r = 1; r < s.world; ++r) {
        sum = sum + parts[r];
      }
      u.rs_out = sum;
    }
    at::Tensor reduced = u.rs_out.to(u.shard.options().requires_grad(false));
    at::Tensor& grad = u.shard.mutable_grad();
    if (grad.defined()) {
      grad.add_(reduced);
    } else {
      grad = reduced;
    }
    u.rs_in = at::Tensor();
    u.rs_out = at::Tensor();
  }
  for (size_t i = 0; i < s.units.size(); ++i) {
    forget_backward(*s.units[i]);
    release(s, i);
  }
}

// After a backward that failed: no reduce-scatter of it is waited for or
// lands in a shard (its peers may be gone), every unit is freed.
void abandon_backward(State& s) {
  s.callback_queued = false;
  s.reduce_order.clear();
  for (size_t i = 0; i < s.units.size(); ++i) {
    Unit& u = *s.units[i];
    forget_backward(u);
    u.rs_work.reset();
    u.rs_in = at::Tensor();
    u.rs_out = at::Tensor();
    for (auto& p : u.params) {
      p.mutable_grad().reset();
    }
    u.gather_work.reset();
    hide(u);
    set_bytes(u.full, 0);
    u.gathered = false;
  }
}

// The unit before `i` in `order`, if any.
std::optional<size_t> before(const std::vector<size_t>& order, size_t i) {
  auto at = std::find(order.rbegin(), order.rend(), i);
  if (at == order.rend() || std::next(at) == order.rend()) {
    return std::nullopt;
  }
  return *std::next(at);
}

std::optional<size_t> after(const std::vector<size_t>& order, size_t i) {
  auto at = std::find(order.begin(), order.end(), i);
  if (at == order.end() || std::next(at) == order.end()) {
    return std::nullopt;
  }
  return *std::next(at);
}

void pre_backward(const std::weak_ptr<State>& weak, size_t i) {
  auto s = weak.lock();
  if (!s) {
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(s->m);
  Unit& u = *s->units[i];
  if (u.in_backward) {
    return;
  }
  u.in_backward = true;
  s->log->add(kBackwardStart, i);
  if (!s->callback_queued) {
    s->callback_queued = true;
    s->backward_peak = gathered_now(*s);
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto st = weak.lock()) {
        std::lock_guard<std::recursive_mutex> lock(st->m);
        finish_backward(*st);
      }
    });
  }
  gather(*s, i);
  if (s->prefetch) {
    if (auto prev = before(s->ended, i)) {
      launch_gather(*s, *prev, true);
    }
  }
}

}  // namespace

struct remat_dist_fsdp {
  std::shared_ptr<State> state;

  ~remat_dist_fsdp() {
    for (auto& u : state->units) {
      for (auto& [node, key] : u->hooks) {
        node->del_post_hook(key);
      }
    }
  }
};

extern "C" {

remat_dist_err remat_dist_fsdp_new(remat_dist_group* g, int reshard_after_forward, int prefetch,
                                   int rank_order, remat_dist_fsdp** out) {
  return guard([&] {
    auto s = std::make_shared<State>();
    s->pg = g->pg;
    s->timeout = g->timeout;
    s->rank = g->pg->getRank();
    s->world = g->pg->getSize();
    s->reshard_after_forward = reshard_after_forward != 0;
    s->prefetch = prefetch != 0;
    s->rank_order = rank_order != 0;
    *out = new remat_dist_fsdp{s};
  });
}

remat_dist_err remat_dist_fsdp_free(remat_dist_fsdp* f) {
  return guard([&] { delete f; });
}

remat_dist_err remat_dist_fsdp_add_unit(remat_dist_fsdp* f, const char* name,
                                        const char* const* param_names,
                                        remat_dist_tensor* const* params, size_t n,
                                        remat_dist_tensor* shard, int param_dtype,
                                        int reduce_dtype, size_t* index) {
  return guard([&] {
    State& s = *f->state;
    std::lock_guard<std::recursive_mutex> lock(s.m);
    auto u = std::make_unique<Unit>();
    u->name = name;
    u->params = borrowed(params, n);
    for (size_t k = 0; k < n; ++k) {
      u->param_names.emplace_back(param_names[k]);
    }
    TORCH_CHECK(n > 0, "sharded unit `", u->name, "` has no parameters");
    const at::Tensor& first = u->params[0];
    for (size_t k = 0; k < n; ++k) {
      const at::Tensor& p = u->params[k];
      TORCH_CHECK(p.is_leaf() && p.requires_grad(), "sharded unit `", u->name, "`: parameter `",
                  u->param_names[k], "` is not a trainable leaf: pass trainable parameters only");
      TORCH_CHECK(p.scalar_type() == first.scalar_type() && p.device() == first.device(),
                  "sharded unit `", u->name, "`: parameter `", u->param_names[k], "` is ",
                  p.scalar_type(), " on ", p.device(), " but `", u->param_names[0], "` is ",
                  first.scalar_type(), " on ", first.device(),
                  ": a unit's parameters share one dtype and device; split it into units that do");
      TORCH_CHECK(p.is_contiguous() && p.numel() > 0, "sharded unit `", u->name,
                  "`: parameter `", u->param_names[k], "` is empty or not contiguous");
    }
    at::NoGradGuard no_grad;
    // Every rank starts from rank 0's values, as data parallel does (W4).
    c10d::broadcast_coalesced(s.pg, u->params, 250u << 20, 0);
    int64_t total = 0;
    for (auto& p : u->params) {
      u->offsets.push_back(total);
      u->shapes.push_back(p.sizes().vec());
      total += p.numel();
    }
    u->shard_len = (total + s.world - 1) / s.world;
    u->padded = u->shard_len * s.world;
    TORCH_CHECK(shard->numel() == u->shard_len && shard->scalar_type() == first.scalar_type(),
                "the shard of unit `", u->name, "` must hold ", u->shard_len, " elements of ",
                first.scalar_type());
    auto compute = param_dtype < 0 ? first.scalar_type() : static_cast<at::ScalarType>(param_dtype);
    u->reduce_dtype = reduce_dtype < 0 ? first.scalar_type()
                                       : static_cast<at::ScalarType>(reduce_dtype);
    at::Tensor values = at::zeros({u->padded}, first.options().requires_grad(false));
    for (size_t k = 0; k < n; ++k) {
      values.narrow(0, u->offsets[k], u->params[k].numel()).copy_(u->params[k].reshape({-1}));
    }
    u->shard = *shard;
    u->shard.detach().copy_(values.narrow(0, s.rank * u->shard_len, u->shard_len));
    u->full = at::empty({u->padded}, first.options().dtype(compute).requires_grad(false));
    size_t i = s.units.size();
    std::weak_ptr<State> weak = f->state;
    // The accumulators exist before the parameters take the compute dtype:
    // each records the dtype a gradient is cast to on its way in, so that
    // gradients of bf16 parameters arrive in fp32 (rule F8).
    for (size_t k = 0; k < n; ++k) {
      auto node = torch::autograd::impl::grad_accumulator(u->params[k]);
      TORCH_CHECK(node, "no gradient accumulator for `", u->param_names[k], "`");
      auto key = node->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [weak, i](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
            if (auto st = weak.lock()) {
              std::lock_guard<std::recursive_mutex> lock(st->m);
              Unit& unit = *st->units[i];
              unit.reported += 1;
              if (unit.reported == unit.params.size() && !unit.reduced) {
                launch_reduce(*st, i);
              }
            }
            return outputs;
          }));
      u->hooks.emplace_back(node, key);
    }
    // The parameters now view the flat buffer, in its dtype (metadata of
    // their own TensorImpl: their accumulators and VarStore entries stay).
    for (size_t k = 0; k < n; ++k) {
      auto* impl = u->params[k].unsafeGetTensorImpl();
      impl->set_storage_and_dtype(u->full.storage(), u->full.dtype());
    }
    u->gathered = true;
    s.units.push_back(std::move(u));
    release(s, i);
    *index = i;
  });
}

remat_dist_err remat_dist_fsdp_pre_forward(remat_dist_fsdp* f, size_t i, int recomputing) {
  return guard([&] {
    State& s = *f->state;
    std::lock_guard<std::recursive_mutex> lock(s.m);
    TORCH_CHECK(i < s.units.size(), "no sharded unit ", i);
    check_unchanged(*s.units[i]);
    if (recomputing == 0) {
      if (std::find(s.started.begin(), s.started.end(), i) != s.started.end()) {
        // A unit that ran already: a new step begins. A backward that
        // failed never reached its end-of-backward callback: forget its
        // half-done state, so that this step's backward starts afresh.
        if (s.callback_queued) {
          abandon_backward(s);
        }
        s.started_last = std::move(s.started);
        s.started.clear();
        s.ended.clear();
        std::lock_guard<std::mutex> log_lock(s.log->m);
        s.log->events.clear();
      }
      s.started.push_back(i);
    }
    gather(s, i);
    s.log->add(kForwardStart, i);
    // Issued as the unit starts computing, so that it overlaps that compute.
    if (recomputing == 0 && s.prefetch) {
      if (auto next = after(s.started_last, i)) {
        launch_gather(s, *next, true);
      }
    }
  });
}

remat_dist_err remat_dist_fsdp_post_forward(remat_dist_fsdp* f, size_t i,
                                            remat_dist_tensor* const* outputs, size_t n,
                                            int recomputing) {
  return guard([&] {
    State& s = *f->state;
    std::lock_guard<std::recursive_mutex> lock(s.m);
    TORCH_CHECK(i < s.units.size(), "no sharded unit ", i);
    s.log->add(kForwardEnd, i);
    if (recomputing != 0) {
      // Rule F4: a recomputed unit stays gathered for its backward.
      return;
    }
    s.ended.push_back(i);
    bool backward_comes = false;
    std::weak_ptr<State> weak = f->state;
    for (auto& o : borrowed(outputs, n)) {
      if (o.defined() && o.requires_grad()) {
        backward_comes = true;
        o.register_hook([weak, i](const at::TensorBase&) { pre_backward(weak, i); });
      }
    }
    if (s.reshard_after_forward || !backward_comes) {
      release(s, i);
    }
  });
}

remat_dist_err remat_dist_fsdp_gather_into(remat_dist_fsdp* f, size_t i, remat_dist_tensor* out) {
  return guard([&] {
    State& s = *f->state;
    std::lock_guard<std::recursive_mutex> lock(s.m);
    TORCH_CHECK(i < s.units.size(), "no sharded unit ", i);
    Unit& u = *s.units[i];
    TORCH_CHECK(out->numel() == u.padded, "gather_into: wrong size");
    at::NoGradGuard no_grad;
    c10d::AllgatherOptions opts;
    opts.timeout = s.timeout;
    at::Tensor in = u.shard.detach();
    at::Tensor dst = *out;
    s.pg->all_gather_single(dst, in, opts)->wait(s.timeout);
  });
}

remat_dist_err remat_dist_fsdp_events(remat_dist_fsdp* f, int64_t* buf, size_t cap, size_t* n) {
  return guard([&] {
    auto& log = *f->state->log;
    std::lock_guard<std::mutex> lock(log.m);
    for (size_t e = 0; e < log.events.size() && e < cap; ++e) {
      for (size_t j = 0; j < 3; ++j) {
        buf[3 * e + j] = log.events[e][j];
      }
    }
    *n = log.events.size();
  });
}

remat_dist_err remat_dist_fsdp_gathered_bytes(remat_dist_fsdp* f, size_t* now,
                                              size_t* backward_peak) {
  return guard([&] {
    State& s = *f->state;
    std::lock_guard<std::recursive_mutex> lock(s.m);
    *now = gathered_now(s);
    *backward_peak = s.backward_peak;
  });
}

}  // extern "C"
