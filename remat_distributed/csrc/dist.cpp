// remat_distributed's bridge: c10d's TCPStore, ProcessGroupGloo and Reducer
// behind the C ABI of dist.h. Every exported function that can fail runs in
// remat_runtime's `guard` (guard.h), so no C++ exception reaches Rust.
#include "dist.h"

#include "group.h"
#include "guard.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>


#ifdef REMAT_NCCL
// nccl.cpp: c10d's ProcessGroupNCCL over `store`.
namespace remat_nccl {
c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int world_size,
                                               std::chrono::milliseconds timeout);
}
#endif

using Clock = std::chrono::steady_clock;

// What one backward did, written by hooks on autograd's and Gloo's threads
// and read between steps. Reset by every prepare_for_backward.
struct remat_dist_stats {
  std::mutex m;
  Clock::time_point epoch = Clock::now();
  // Per parameter: runs of its AccumulateGrad node this backward.
  std::vector<int64_t> reports;
  // Per bucket launched: launch and completion, ns since `epoch` (-1: not done).
  std::vector<std::pair<int64_t, int64_t>> launches;
  // Per watched tensor: buckets launched when its gradient was computed.
  std::vector<int64_t> watched;

  int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch).count();
  }
};

namespace {

// c10d's own allreduce of the bucket, as PyTorch's default hook does it,
// with the launch and the completion written down: the Reducer calls
// runHook on the autograd thread the moment a bucket is full.
class RecordingAllReduce
    : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  RecordingAllReduce(c10::intrusive_ptr<c10d::ProcessGroup> pg, std::shared_ptr<remat_dist_stats> stats,
                     std::chrono::milliseconds timeout)
      : CppCommHookInterface(std::move(pg)), stats_(std::move(stats)), timeout_(timeout) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    std::vector<at::Tensor> tensors{bucket.getBufferRef()};
    // With a hook registered the Reducer copies gradients unscaled; scale
    // as it does without one (a product by 1 / world size), so W5 holds.
    tensors[0].mul_(1.0 / static_cast<double>(state_->getSize()));
    size_t slot = 0;
    {
      std::lock_guard<std::mutex> lock(stats_->m);
      slot = stats_->launches.size();
      stats_->launches.emplace_back(stats_->now(), -1);
    }
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    opts.timeout = timeout_;
    auto fut = state_->allreduce(tensors, opts)->getFuture();
    std::weak_ptr<remat_dist_stats> weak = stats_;
    // The Reducer waits on the future returned, which completes only after
    // the completion is written down: no step reads a bucket as running.
    return fut->then(
        [weak, slot](c10::ivalue::Future& done) {
          if (auto s = weak.lock()) {
            std::lock_guard<std::mutex> lock(s->m);
            if (slot < s->launches.size()) {
              s->launches[slot].second = s->now();
            }
          }
          return done.value();
        },
        fut->elementType());
  }

 private:
  std::shared_ptr<remat_dist_stats> stats_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

struct remat_dist_reducer {
  std::shared_ptr<c10d::Reducer> reducer;
  std::vector<std::vector<size_t>> buckets;
  std::shared_ptr<remat_dist_stats> stats;
  // The parameters' AccumulateGrad nodes and our counting hooks on them.
  // The handle's type is whatever `grad_accumulator` returns: a shared_ptr
  // up to libtorch 2.11, an intrusive_ptr from 2.13 on.
  using NodeHandle =
      decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
  std::vector<std::pair<NodeHandle, uintptr_t>> counters;
  bool find_unused = false;
  bool static_graph = false;
  bool first_prepared = false;

  ~remat_dist_reducer() {
    for (auto& [node, key] : counters) {
      node->del_post_hook(key);
    }
  }
};

using remat_bridge::guard;

namespace {


// Waits for `work` within the group's timeout; a peer that is gone makes
// Gloo throw here, which `guard` turns into an error.
void finish(remat_dist_group* g, const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait(g->timeout);
}

}  // namespace

extern "C" {

void remat_dist_string_free(char* s) { std::free(s); }

remat_dist_err remat_dist_group_new(const char* host, uint16_t port, int rank, int world_size,
                                    int64_t timeout_ms, const char* device_host, int nccl,
                                    remat_dist_group** out) {
  return guard([&] {
    std::chrono::milliseconds timeout(timeout_ms);
    c10d::TCPStoreOptions opts;
    opts.port = port;
    opts.isServer = rank == 0;
    opts.numWorkers = static_cast<size_t>(world_size);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);

    auto gloo_opts = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_opts->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(std::string(device_host)));
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, gloo_opts);

    auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
    if (nccl != 0) {
#ifdef REMAT_NCCL
      // CUDA tensors go to NCCL, CPU ones (a barrier's, say) stay on Gloo.
      auto cuda = remat_nccl::make_backend(store, rank, world_size, timeout);
      pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
      pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, cuda);
#else
      TORCH_CHECK(false, "remat_distributed was built without the `cuda` feature");
#endif
    }
    *out = new remat_dist_group{store, pg, timeout};
  });
}

void remat_dist_group_free(remat_dist_group* g) {
  // Destructors of c10d objects do not throw past their own catch blocks;
  // guard anyway, and drop whatever it reports (there is no caller to tell).
  remat_dist_err err = guard([&] { delete g; });
  if (err != nullptr) {
    std::free(err);
  }
}

remat_dist_err remat_dist_all_reduce_sum(remat_dist_group* g, remat_dist_tensor* t) {
  return guard([&] {
    std::vector<at::Tensor> ts{*t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    opts.timeout = g->timeout;
    finish(g, g->pg->allreduce(ts, opts));
  });
}

remat_dist_err remat_dist_broadcast(remat_dist_group* g, remat_dist_tensor* t, int root) {
  return guard([&] {
    std::vector<at::Tensor> ts{*t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = g->timeout;
    finish(g, g->pg->broadcast(ts, opts));
  });
}

remat_dist_err remat_dist_barrier(remat_dist_group* g) {
  return guard([&] {
    c10d::BarrierOptions opts;
    opts.timeout = g->timeout;
    finish(g, g->pg->barrier(opts));
  });
}

remat_dist_err remat_dist_broadcast_coalesced(remat_dist_group* g, remat_dist_tensor* const* ts,
                                              size_t n, int64_t buffer_bytes) {
  return guard([&] {
    // Parameters are leaves that require grad: copying into them in place
    // is allowed only outside grad mode.
    at::NoGradGuard no_grad;
    auto tensors = borrowed(ts, n);
    c10d::broadcast_coalesced(g->pg, tensors, static_cast<size_t>(buffer_bytes), 0);
  });
}

remat_dist_err remat_dist_reducer_new(remat_dist_group* g, remat_dist_tensor* const* params,
                                      size_t n, int64_t first_bucket_bytes, int64_t bucket_bytes,
                                      int find_unused, int static_graph,
                                      remat_dist_reducer** out) {
  return guard([&] {
    auto tensors = borrowed(params, n);
    std::vector<size_t> limits{static_cast<size_t>(first_bucket_bytes),
                               static_cast<size_t>(bucket_bytes)};
    std::vector<bool> sparse(n, false);
    auto [buckets, bucket_limits] = c10d::compute_bucket_assignment_by_size(tensors, limits, sparse);
    // Gradients become ready roughly in reverse order of the parameters,
    // so the buckets are handed over last first, as PyTorch's DDP does.
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(bucket_limits.begin(), bucket_limits.end());
    std::vector<int64_t> caps(bucket_limits.begin(), bucket_limits.end());
    std::unordered_map<size_t, std::string> names;
    auto reducer = std::make_shared<c10d::Reducer>(
        tensors, buckets, g->pg, sparse, bucket_bytes, find_unused != 0,
        /*gradient_as_bucket_view=*/false, names, first_bucket_bytes,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, caps);
    if (static_graph != 0) {
      reducer->set_static_graph();
    }
    auto stats = std::make_shared<remat_dist_stats>();
    stats->reports.assign(n, 0);
    reducer->register_comm_hook(std::make_unique<RecordingAllReduce>(g->pg, stats, g->timeout));
    auto r = std::make_unique<remat_dist_reducer>();
    r->reducer = reducer;
    r->buckets = buckets;
    r->stats = stats;
    r->find_unused = find_unused != 0;
    r->static_graph = static_graph != 0;
    // A post hook on each parameter's AccumulateGrad, beside the Reducer's
    // own: it counts every run of the node that reports the gradient, so
    // a second report would show even if the Reducer's bookkeeping missed it.
    for (size_t i = 0; i < n; ++i) {
      auto node = torch::autograd::impl::grad_accumulator(tensors[i]);
      std::weak_ptr<remat_dist_stats> weak = stats;
      auto key = node->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [weak, i](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
            if (auto s = weak.lock()) {
              std::lock_guard<std::mutex> lock(s->m);
              s->reports[i] += 1;
            }
            return outputs;
          }));
      r->counters.emplace_back(node, key);
    }
    *out = r.release();
  });
}

remat_dist_err remat_dist_reducer_free(remat_dist_reducer* r) {
  // ~Reducer is noexcept(false).
  return guard([&] { delete r; });
}

remat_dist_err remat_dist_reducer_rebuild_buckets(remat_dist_reducer* r) {
  return guard([&] { r->reducer->rebuild_buckets(); });
}

remat_dist_err remat_dist_reducer_prepare(remat_dist_reducer* r, remat_dist_tensor* const* outputs,
                                          size_t n) {
  return guard([&] {
    auto outs = borrowed(outputs, n);
    {
      std::lock_guard<std::mutex> lock(r->stats->m);
      std::fill(r->stats->reports.begin(), r->stats->reports.end(), 0);
      r->stats->launches.clear();
      r->stats->watched.clear();
    }
    // With a static graph c10d's Reducer only counts the first backward's
    // hooks and reduces everything once that backward ends, when told to
    // (Python's DDP queues the call from a node at the outputs): a hook on
    // each output, which autograd runs first, queues it the same way.
    bool delay = r->static_graph && !r->first_prepared;
    r->first_prepared = true;
    // As Python's DDP: the graph is searched for unused parameters only
    // with find_unused_parameters and without a static graph (which finds
    // them in its first backward).
    bool search = r->find_unused && !r->static_graph;
    r->reducer->prepare_for_backward(search ? outs : std::vector<at::Tensor>{});
    if (delay) {
      std::weak_ptr<c10d::Reducer> weak = r->reducer;
      auto queued = std::make_shared<bool>(false);
      for (auto& o : outs) {
        o.register_hook([weak, queued](const at::TensorBase&) {
          if (*queued) {
            return;
          }
          *queued = true;
          torch::autograd::Engine::get_default_engine().queue_callback([weak] {
            if (auto red = weak.lock()) {
              red->delay_all_reduce();
            }
          });
        });
      }
    }
  });
}

remat_dist_err remat_dist_reducer_watch(remat_dist_reducer* r, remat_dist_tensor* t) {
  return guard([&] {
    TORCH_CHECK(t->requires_grad(), "a watched tensor must require grad");
    std::weak_ptr<remat_dist_stats> weak = r->stats;
    t->register_hook([weak](const at::TensorBase&) {
      if (auto s = weak.lock()) {
        std::lock_guard<std::mutex> lock(s->m);
        s->watched.push_back(static_cast<int64_t>(s->launches.size()));
      }
    });
  });
}

remat_dist_err remat_dist_reducer_stats(remat_dist_reducer* r, int64_t* reports, size_t n_params,
                                        int64_t* launches, size_t launch_cap, size_t* n_launches,
                                        int64_t* watched, size_t watch_cap, size_t* n_watched) {
  return guard([&] {
    std::lock_guard<std::mutex> lock(r->stats->m);
    auto& s = *r->stats;
    for (size_t i = 0; i < n_params && i < s.reports.size(); ++i) {
      reports[i] = s.reports[i];
    }
    for (size_t i = 0; i < s.launches.size() && i < launch_cap; ++i) {
      launches[2 * i] = s.launches[i].first;
      launches[2 * i + 1] = s.launches[i].second;
    }
    *n_launches = s.launches.size();
    for (size_t i = 0; i < s.watched.size() && i < watch_cap; ++i) {
      watched[i] = s.watched[i];
    }
    *n_watched = s.watched.size();
  });
}

remat_dist_err remat_dist_reducer_buckets(remat_dist_reducer* r, size_t* idx, size_t cap,
                                          size_t* lens, size_t lens_cap, size_t* n_buckets) {
  return guard([&] {
    size_t k = 0;
    for (size_t b = 0; b < r->buckets.size(); ++b) {
      if (b < lens_cap) {
        lens[b] = r->buckets[b].size();
      }
      for (size_t i : r->buckets[b]) {
        if (k < cap) {
          idx[k] = i;
        }
        ++k;
      }
    }
    *n_buckets = r->buckets.size();
  });
}

}  // extern "C"
