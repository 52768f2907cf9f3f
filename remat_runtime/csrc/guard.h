// The bridge's exception barrier, shared by its translation units
// (bridge.cpp, cuda_diag.cpp): every exported function that can fail runs
// its body in `guard`, so no C++ exception crosses into Rust; the error
// comes back as a heap string (see bridge.h).
#pragma once

#include "bridge.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>

namespace remat_bridge {

// A malloc'd copy of `s` (Rust frees it with `remat_string_free`).
inline char* dup_string(const char* s) {
  size_t n = std::strlen(s);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out != nullptr) {
    std::memcpy(out, s, n + 1);
  }
  return out;
}

// Runs `f`, turning any C++ exception into an error string.
template <class F>
remat_err guard(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const c10::Error& e) {
    return dup_string(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return dup_string(e.what());
  } catch (...) {
    return dup_string("unknown C++ exception in the remat bridge");
  }
}

}  // namespace remat_bridge
