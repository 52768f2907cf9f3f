// Placeholders inside the bridge: tensors with an output's metadata and no
// data, whose every data access fails with a message (docs/semantics.md,
// rule P4). Made by bridge.cpp; early_stop.cpp makes them for the ops a
// stopped recomputation does not compute (rule C17).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <string>

namespace remat_bridge {

// A placeholder with this layout on `device` over a storage of `nbytes`.
at::Tensor make_placeholder(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                            int64_t storage_offset, c10::ScalarType dtype,
                            c10::Device device, int64_t nbytes,
                            const std::string& message);

// Whether `t` is a placeholder (or a view of one).
bool is_placeholder(const at::Tensor& t);

}  // namespace remat_bridge
