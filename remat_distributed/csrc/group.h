// The joined group and the handles helper, shared by the bridge's units (dist.cpp
// forms it; fsdp.cpp issues the sharded units' collectives on it).
#pragma once

#include "dist.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <vector>

struct remat_dist_group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::chrono::milliseconds timeout;
};

// The tensors behind `n` borrowed handles (shallow copies: C++ keeps its
// own references, deletes none of Rust's).
inline std::vector<at::Tensor> borrowed(remat_dist_tensor* const* ts, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(*ts[i]);
  }
  return out;
}
