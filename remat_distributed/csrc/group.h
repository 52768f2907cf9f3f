// The joined group, shared by the bridge's translation units (dist.cpp
// forms it; fsdp.cpp issues the sharded units' collectives on it).
#pragma once

#include "dist.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

struct remat_dist_group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::chrono::milliseconds timeout;
};
