// remat_distributed's bridge: c10d's TCPStore, ProcessGroupGloo and Reducer
// behind the C ABI of dist.h. Every exported function that can fail runs in
// remat_runtime's `guard` (guard.h), so no C++ exception reaches Rust.
#include "dist.h"

#include "guard.h"

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

struct remat_dist_group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::chrono::milliseconds timeout;
};

struct remat_dist_reducer {
  std::shared_ptr<c10d::Reducer> reducer;
  std::vector<std::vector<size_t>> buckets;
};

using remat_bridge::guard;

namespace {

std::vector<at::Tensor> borrowed(remat_dist_tensor* const* ts, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(*ts[i]);
  }
  return out;
}

// Waits for `work` within the group's timeout; a peer that is gone makes
// Gloo throw here, which `guard` turns into an error.
void finish(remat_dist_group* g, const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait(g->timeout);
}

}  // namespace

extern "C" {

void remat_dist_string_free(char* s) { std::free(s); }

remat_dist_err remat_dist_group_new(const char* host, uint16_t port, int rank, int world_size,
                                    int64_t timeout_ms, const char* device_host,
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
    *out = new remat_dist_reducer{reducer, buckets};
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
  return guard([&] { r->reducer->prepare_for_backward(borrowed(outputs, n)); });
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
