// The planner's trace of memory through one backward: every node reachable
// from the loss samples the bytes in use (the C heap, or a CUDA device's
// caching allocator) before and after it runs, with its sequence number,
// so that the profile can tell which checkpoint's backward each sample was
// taken in (docs/planner.md, "Peak during backward"). The backward asks
// for the parameters' gradients instead of accumulating them (what
// torch.autograd.grad does), so neither `.grad` nor a data-parallel
// wrapper's accumulator hooks see it, and a hook drops each gradient
// where a step would add it into `.grad` and free it: the bytes in use
// follow a training step's.
// See bridge.h for the conventions.

#include "bridge.h"
#include "guard.h"

#include <ATen/ATen.h>
#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace {

using remat_bridge::guard;
using torch::autograd::AccumulateGrad;
using torch::autograd::FunctionPreHook;
using torch::autograd::Node;

// One trace at a time (the profile runs one backward at a time); the mutex
// orders samples from the engine's threads.
struct Trace {
  std::mutex mutex;
  int device = -1;
  std::vector<int64_t> seqs;
  std::vector<int64_t> bytes;
};

Trace& trace() {
  static Trace t;
  return t;
}

int64_t bytes_in_use(int device) {
  if (device < 0) {
    return remat_heap_bytes_in_use();
  }
  int64_t stats[4] = {-1, -1, -1, -1};
  remat_err err = remat_cuda_memory_stats(device, stats);
  if (err != nullptr) {
    remat_string_free(err);
    return -1;
  }
  return stats[0];
}

void sample(const Node* node) {
  Trace& t = trace();
  int64_t now = bytes_in_use(t.device);
  // A node made by the forward has its sequence number; -1 for others.
  uint64_t seq = node->sequence_nr();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.seqs.push_back(
      seq > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
          ? -1
          : static_cast<int64_t>(seq));
  t.bytes.push_back(now);
}

struct PreSample : torch::autograd::FunctionPreHook {
  explicit PreSample(const Node* node) : node(node) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& grads) override {
    sample(node);
    return grads;
  }
  const Node* node;
};

struct PostSample : torch::autograd::FunctionPostHook {
  explicit PostSample(const Node* node) : node(node) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    sample(node);
    return outputs;
  }
  const Node* node;
};

// A parameter's tensor hook, last of its hooks: for an accumulator this
// backward does not run, the engine calls the tensor hooks before capturing
// the gradient, and captures what they return. Dropping it frees the
// gradient where a step's accumulator would have added it into `.grad` and
// freed it.
struct DropGradient : torch::autograd::FunctionPreHook {
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& grads) override {
    return torch::autograd::variable_list(grads.size());
  }
};

// The DropGradient hooks given to parameters for one trace, taken off when
// it ends, however it ends (a parameter's tensor hooks are its own, kept
// beyond this backward).
struct DropGradients {
  std::vector<std::pair<AccumulateGrad*, const FunctionPreHook*>> given;

  void give(AccumulateGrad* acc) {
    auto hook = std::make_unique<DropGradient>();
    given.emplace_back(acc, hook.get());
    acc->tensor_pre_hooks().push_back(std::move(hook));
  }

  ~DropGradients() {
    for (auto& [acc, hook] : given) {
      auto& hooks = acc->tensor_pre_hooks();
      for (auto it = hooks.begin(); it != hooks.end(); ++it) {
        if (it->get() == hook) {
          hooks.erase(it);
          break;
        }
      }
    }
  }
};

// Records the bytes in use when the backward reaches the node it is on.
struct FirstSample : torch::autograd::FunctionPreHook {
  explicit FirstSample(int64_t* out) : out(out) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& grads) override {
    if (*out < 0) {
      *out = remat_heap_bytes_in_use();
    }
    return grads;
  }
  int64_t* out;
};

// What a plain backward's own start takes on the C heap for a graph of
// `nodes` nodes (the engine's table of dependencies, the first gradient):
// measured on a chain of as many nodes of a one-element leaf of our own,
// as the bytes in use when the backward reaches the chain's last node over
// those before it. A training step pays this; what the trace's backward
// pays more (asking for gradients, dropping them) it does not.
int64_t plain_start(size_t nodes) {
  at::AutoGradMode grad_mode(true);
  auto once = [&] {
    at::Tensor x = at::ones({1}).set_requires_grad(true);
    at::Tensor y = x;
    for (size_t i = 1; i < nodes; ++i) {
      y = y * 1.0;
    }
    int64_t first = -1;
    y.grad_fn()->add_pre_hook(std::make_unique<FirstSample>(&first));
    int64_t before = remat_heap_bytes_in_use();
    torch::autograd::backward({y}, {}, false, false);
    return first - before;
  };
  // Twice, the second kept: the first may allocate what stays.
  once();
  return once();
}

}  // namespace

extern "C" {

int64_t remat_sequence_number_peek(void) {
  return static_cast<int64_t>(at::sequence_number::peek());
}

int64_t remat_bytes_in_use(int device) { return bytes_in_use(device); }

remat_err remat_trace_backward(const remat_tensor* root, int device) {
  return guard([&] {
    Trace& t = trace();
    {
      std::lock_guard<std::mutex> lock(t.mutex);
      t.device = device;
      t.seqs.clear();
      t.bytes.clear();
    }
    if (root == nullptr || !root->defined() || !root->grad_fn()) {
      return;
    }
    const bool heap = device < 0;
    const int64_t at_start = heap ? remat_heap_bytes_in_use() : 0;
    std::vector<at::Tensor> params;
    // Holds each accumulator (a node the graph owns only weakly) while
    // its hook is given.
    std::vector<c10::intrusive_ptr<Node>> accumulators;
    DropGradients drops;
    std::vector<Node*> nodes;
    {
      std::unordered_set<Node*> seen;
      std::vector<c10::intrusive_ptr<Node>> todo{root->grad_fn()};
      while (!todo.empty()) {
        c10::intrusive_ptr<Node> node = std::move(todo.back());
        todo.pop_back();
        if (node == nullptr || !seen.insert(node.get()).second) {
          continue;
        }
        if (auto* acc = dynamic_cast<AccumulateGrad*>(node.get())) {
          drops.give(acc);
          params.push_back(acc->variable);
          accumulators.push_back(std::move(node));
          continue;
        }
        nodes.push_back(node.get());
        for (const auto& edge : node->next_edges()) {
          if (edge.function) {
            todo.push_back(edge.function);
          }
        }
      }
    }
    if (params.empty()) {
      return;
    }
    // The sampling hooks stay in the levels (a measure of the backward at
    // its nodes' boundaries carries its own); what else the trace
    // allocates, and what asking for gradients costs the engine over a
    // plain backward, is taken off every sample once the first says how
    // much it is.
    const int64_t before_hooks = heap ? remat_heap_bytes_in_use() : 0;
    for (Node* node : nodes) {
      node->add_pre_hook(std::make_unique<PreSample>(node));
      node->add_post_hook(std::make_unique<PostSample>(node));
    }
    const int64_t hooks = heap ? remat_heap_bytes_in_use() - before_hooks : 0;
    const int64_t plain = heap ? plain_start(nodes.size() + params.size()) : 0;
    {
      std::lock_guard<std::mutex> lock(t.mutex);
      t.seqs.reserve(2 * nodes.size() + 16);
      t.bytes.reserve(2 * nodes.size() + 16);
    }
    std::vector<Node*>().swap(nodes);
    torch::autograd::grad({*root}, params, {}, /*retain_graph=*/false,
                          /*create_graph=*/false, /*allow_unused=*/true);
    std::lock_guard<std::mutex> lock(t.mutex);
    if (heap && !t.bytes.empty() && t.bytes[0] >= 0) {
      int64_t extra = std::max<int64_t>(0, t.bytes[0] - at_start - hooks - plain);
      for (int64_t& b : t.bytes) {
        b -= extra;
      }
    }
  });
}

size_t remat_trace_count(void) {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.seqs.size();
}

size_t remat_trace_read(int64_t* seqs, int64_t* bytes, size_t capacity) {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  size_t n = t.seqs.size();
  for (size_t i = 0; i < n && i < capacity; ++i) {
    seqs[i] = t.seqs[i];
    bytes[i] = t.bytes[i];
  }
  return n;
}

}  // extern "C"
