// The C ABI between remat_runtime (Rust) and libtorch (C++).
//
// Tensors cross as `at::Tensor*`, the same handle tch uses for `C_tensor`:
// a pointer returned through an `at::Tensor**` out-parameter is owned by the
// caller (Rust wraps it with `tch::Tensor::from_ptr`); a `const at::Tensor*`
// argument is borrowed for the duration of the call.
//
// Every function that can fail returns a heap string (free it with
// `remat_string_free`) or NULL on success. No C++ exception crosses into
// Rust, and Rust callbacks never unwind into C++: they report failure by
// returning non-zero after calling `remat_error_set`.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __cplusplus
namespace at {
class Tensor;
}
typedef at::Tensor remat_tensor;
extern "C" {
#else
typedef struct remat_tensor remat_tensor;
#endif

typedef char* remat_err;

// Callbacks into Rust, registered once by `remat_bridge_init`.
typedef struct remat_callbacks {
  // Backward of a custom node. `grads[i]` is borrowed (gradient of output i,
  // zeros when autograd had none). Rust writes one owned tensor or NULL per
  // input into `out`.
  int (*node_apply)(void* ctx, void* node, remat_tensor* const* grads,
                    size_t n_grads, remat_tensor** out, size_t n_out,
                    void* err);
  void (*node_release)(void* ctx);
  void (*node_drop)(void* ctx);
  // Saved-tensor hooks. `tensor` is owned by Rust (a detached alias of the
  // saved tensor); `param` says whether the saved tensor is a parameter (a
  // leaf that requires grad) or a view of one; `thread` and `seq` are the
  // thread's id and next autograd sequence number (the saving node is
  // `seq - 1` on `thread`, see remat_graph_nodes). Returns a payload, or NULL
  // after `remat_error_set`.
  void* (*hooks_pack)(void* hooks, remat_tensor* tensor, int param,
                      uint64_t thread, uint64_t seq, void* err);
  // Returns an owned tensor, or NULL after `remat_error_set`.
  remat_tensor* (*hooks_unpack)(void* hooks, void* payload, void* err);
  void (*payload_drop)(void* hooks, void* payload);
  void (*hooks_drop)(void* hooks);
  // CUDA builds only: the caching allocator could not allocate `requested`
  // bytes on `device` (called before the error propagates).
  void (*cuda_oom)(int64_t device, uint64_t requested, uint64_t device_total,
                   uint64_t device_free);
  // CUDA builds only: a label for the allocation being made (writes at most
  // `cap` bytes into `buf`, returns the label's full length).
  size_t (*cuda_alloc_context)(char* buf, size_t cap);
} remat_callbacks;

void remat_bridge_init(const remat_callbacks* callbacks);
void remat_string_free(char* s);
void remat_error_set(void* err, const char* msg, size_t len);

// --- custom autograd nodes ---------------------------------------------------

// Attaches a node with Rust backward `ctx` to `outputs` (in: results computed
// without grad; out: the same data as variables whose grad_fn is the node),
// when grad mode is on and some input requires grad. `*attached` says whether
// a node now owns `ctx`; if not, the caller keeps it and the outputs are left
// as they were. `saved` are stored as SavedVariables on the node (outputs of
// the node among them are saved as outputs, which avoids a cycle).
remat_err remat_fn_apply(void* ctx, const char* name,
                         const remat_tensor* const* inputs, size_t n_inputs,
                         remat_tensor** outputs, size_t n_outputs,
                         const remat_tensor* const* saved, size_t n_saved,
                         int* attached);
// Unpacks saved tensor `i` of a node handed to `node_apply`.
remat_err remat_node_saved(void* node, size_t i, remat_tensor** out);
// Unpacks saved tensor `i` of the node that is `tensor`'s grad_fn.
remat_err remat_grad_fn_saved(const remat_tensor* tensor, size_t i,
                              remat_tensor** out);

// A non-leaf tensor that requires grad, with `t`'s data, metadata and a fresh
// version counter, whose grad_fn fails if it is ever run (a value served on
// replay).
remat_err remat_served_value(const remat_tensor* t, remat_tensor** out);
// `t` without autograd history, sharing its storage and version counter
// (a detach that does not go through the dispatcher).
remat_err remat_detached_alias(const remat_tensor* t, remat_tensor** out);

// --- saved-tensor hooks --------------------------------------------------------

// Pushes a hook pair (NULL: a level with no hooks) on this thread's stack.
// The stack owns `hooks` from here on (dropped through `hooks_drop`).
remat_err remat_hooks_push(void* hooks);
remat_err remat_hooks_pop(void);
size_t remat_hooks_depth(void);

// --- placeholders ------------------------------------------------------------

remat_err remat_placeholder_new(const int64_t* sizes, const int64_t* strides,
                                size_t ndim, int64_t storage_offset,
                                int scalar_type, int device, int64_t nbytes,
                                const char* msg, remat_tensor** out);
// A tensor over `of`'s storage with this layout and element type, sharing
// `of`'s version counter and without autograd history: a value rebuilt
// from any view of its storage.
remat_err remat_alias_with_layout(const remat_tensor* of, const int64_t* sizes,
                                  const int64_t* strides, size_t ndim,
                                  int64_t storage_offset, int scalar_type,
                                  remat_tensor** out);
int remat_is_placeholder(const remat_tensor* t);

// --- tensor metadata in one call ---------------------------------------------

// Dimensions stored inline; a tensor with more reports only `ndim`, and the
// caller reads its sizes and strides separately.
#define REMAT_META_DIMS 6

// What the runtime records about a tensor per region, gathered in one
// crossing instead of one per field.
typedef struct {
  uintptr_t storage_key;  // 0 without a storage
  int64_t storage_nbytes;
  int64_t storage_offset;
  uint32_t version;
  int32_t scalar_type;
  int32_t device;  // tch's code: -1 CPU, -2 MPS, -3 Vulkan, else the CUDA index
  uint8_t has_version;  // inference tensors have no version counter
  uint8_t requires_grad;
  uint8_t reserved;
  uint8_t is_placeholder;
  uint64_t ndim;
  int64_t sizes[REMAT_META_DIMS];
  int64_t strides[REMAT_META_DIMS];
} remat_meta;

remat_err remat_tensor_meta(const remat_tensor* t, remat_meta* out);
// requires_grad && is_leaf, in one crossing.
int remat_is_grad_leaf(const remat_tensor* t);

// --- storage identity, versions, graph task ----------------------------------

uintptr_t remat_storage_key(const remat_tensor* t);
int64_t remat_storage_nbytes(const remat_tensor* t);
int64_t remat_storage_offset(const remat_tensor* t);
// A weak storage handle is the StorageImpl's address (its key).
void* remat_storage_weak_new(const remat_tensor* t);
int remat_storage_weak_alive(const void* weak);
void remat_storage_weak_free(void* weak);
// Weak references to a tensor (its TensorImpl): upgrade gives a new handle
// while some tensor still holds it.
void* remat_tensor_weak_new(const remat_tensor* t);
remat_tensor* remat_tensor_weak_upgrade(const void* weak);
void remat_tensor_weak_free(void* weak);
// A value kept for replay as its storage and version counter (no tensor of
// its own): made from a dense strided tensor only (`out` null otherwise);
// from a weak tensor, `live` gets the tensor instead when it is alive but
// not of that kind. `version` is the counter's value when kept.
remat_err remat_kept_new(const remat_tensor* t, void** out, uint32_t* version);
remat_err remat_kept_from_weak(const void* weak, void** out, uint32_t* version,
                               remat_tensor** live);
remat_err remat_kept_clone(const void* kept, void** out);
uint32_t remat_kept_version(const void* kept);
// The kept value as a tensor without history, with the given layout.
remat_err remat_kept_tensor(const void* kept, const int64_t* sizes,
                            const int64_t* strides, size_t ndim,
                            int64_t storage_offset, int scalar_type,
                            remat_tensor** out);
void remat_kept_free(void* kept);
// A tensor's version counter, shared (views share it), without its data:
// what an offloaded save checks in backward (docs/semantics.md, rule O3).
remat_err remat_version_counter_new(const remat_tensor* t, void** out);
uint32_t remat_version_counter_get(const void* counter);
void remat_version_counter_free(void* counter);
remat_err remat_version(const remat_tensor* t, uint32_t* out);
int remat_grad_mode_enabled(void);
void remat_grad_mode_set(int enabled);
// A guard (heap-allocated, popped in reverse order on the same thread) under
// which ops skip autograd and the ADInplaceOrView kernel: in-place writes
// record no history and bump no version counter. Null if it cannot be made.
void* remat_untracked_push(void);
void remat_untracked_pop(void* guard);
// Autocast (csrc/autocast.cpp): the calling thread's state for every
// device type libtorch has autocast for, in this order: CPU, CUDA, XPU, MPS,
// HPU, XLA, PrivateUse1, IPU, MTIA, MAIA. `available` is 0 where this
// libtorch has no autocast for the type (then `enabled` is 0 and `dtype`
// -1); `dtype` is a c10::ScalarType code. `remat_autocast_set` writes every
// available type and the weight-cast cache flag; it does not touch the
// nesting counter, which the two functions after it move as
// torch.autocast's __enter__ and __exit__ do (returning the new depth).
#define REMAT_AUTOCAST_DEVICES 10
typedef struct remat_autocast_state {
  uint8_t available[REMAT_AUTOCAST_DEVICES];
  uint8_t enabled[REMAT_AUTOCAST_DEVICES];
  int8_t dtype[REMAT_AUTOCAST_DEVICES];
  uint8_t cache_enabled;
} remat_autocast_state;
remat_err remat_autocast_get(remat_autocast_state* out);
remat_err remat_autocast_set(const remat_autocast_state* state);
int remat_autocast_increment_nesting(void);
int remat_autocast_decrement_nesting(void);
remat_err remat_autocast_clear_cache(void);
int remat_graph_task_id(void);
int remat_graph_task_keep_graph(void);
// Bytes the C heap has handed out and not taken back (glibc: the main
// arena's in-use bytes plus every mmapped block), or -1 where unknown.
int64_t remat_heap_bytes_in_use(void);
// The C heap's peak at the node boundaries of backward: every node
// reachable from the roots' grad_fns samples remat_heap_bytes_in_use before
// and after it runs into one process-wide maximum, which
// remat_heap_peak_reset sets to the bytes in use now and remat_heap_peak
// reads (-1 where the heap does not say).
remat_err remat_heap_watch(const remat_tensor* const* roots, size_t n_roots);
void remat_heap_peak_reset(void);
int64_t remat_heap_peak(void);
// The planner's memory trace (memory_trace.cpp). The autograd sequence
// number the next node created on this thread will get.
int64_t remat_sequence_number_peek(void);
// Bytes in use: the C heap (device < 0, -1 where it does not say) or CUDA
// device `device`'s caching allocator (-1 without CUDA).
int64_t remat_bytes_in_use(int device);
// Runs root's backward (graph freed) for the parameters' gradients without
// accumulating them, each dropped where a step would add it into `.grad`,
// with every node sampling remat_bytes_in_use(device) and its sequence
// number (-1 for none) before and after it runs. remat_trace_count says how many samples were taken and
// remat_trace_read copies up to `capacity` of them out, returning how many
// there are.
remat_err remat_trace_backward(const remat_tensor* root, int device);
size_t remat_trace_count(void);
size_t remat_trace_read(int64_t* seqs, int64_t* bytes, size_t capacity);
// A leaf that requires grad, or a view of one.
int remat_is_parameter(const remat_tensor* t);
// The state of libtorch's default generator of a device (-1: CPU, i: CUDA i).
remat_err remat_rng_get_state(int device, remat_tensor** out);
remat_err remat_rng_set_state(int device, const remat_tensor* state);
// Every default generator at once (csrc/generators.cpp): the CPU engine and,
// per visible CUDA device, its seed and offset. `take` makes a snapshot
// (free it with remat_generators_free), `is_current` says whether the live
// generators are in that state (without allocating), `restore` sets them
// to it.
remat_err remat_generators_take(void** out);
remat_err remat_generators_is_current(const void* snapshot, int* out);
remat_err remat_generators_restore(const void* snapshot);
void remat_generators_free(void* snapshot);
// Backward from a scalar `loss`, accumulating into leaves' .grad, optionally
// keeping the graph for another backward.
remat_err remat_backward(const remat_tensor* loss, int keep_graph);
// Every node reachable from the roots' grad_fns, one line each:
// "<thread id> <sequence nr> <name>\n" (a heap string in *out, free it with
// remat_string_free).
remat_err remat_graph_nodes(const remat_tensor* const* roots, size_t n_roots,
                            char** out);

// --- CUDA diagnostics (the `cuda` feature; CPU builds return an error) ------

// 1 when the bridge was built with CUDA diagnostics.
int remat_cuda_built(void);
// Attaches an out-of-memory observer to the CUDA caching allocator that calls
// the `cuda_oom` callback.
remat_err remat_cuda_attach_oom_observer(void);
// Starts (or stops) recording a context for every CUDA allocation, from the
// `cuda_alloc_context` callback.
remat_err remat_cuda_record_contexts(int enabled);
// The allocator's live blocks, one line each: "<address> <size> <context>\n"
// (the context is empty where none was recorded). A heap string in *out.
remat_err remat_cuda_blocks(char** out);
// The address of a storage's data (0 when it has none).
uintptr_t remat_storage_data(const remat_tensor* t);
// The caching allocator's byte counters of `device`: out[0..4] = allocated
// now, allocated peak, reserved now, reserved peak.
remat_err remat_cuda_memory_stats(int device, int64_t* out);
// Starts the peak counters of `device` again from the current values.
remat_err remat_cuda_reset_peak(int device);
// Makes a stream from libtorch's pool (side != 0) or the default stream the
// thread's current stream on `device`; *id is its stream id.
remat_err remat_cuda_use_stream(int device, int side, int64_t* id);
// The id of the thread's current stream on `device`.
remat_err remat_cuda_current_stream(int device, int64_t* id);

// --- Global switches (every build) ------------------------------------------

// at::globalContext().setDeterministicAlgorithms(enabled, warn_only = false).
remat_err remat_set_deterministic_algorithms(int enabled);

// --- Offload copies on CUDA (the `cuda` feature; CPU builds: an error) -----

// Copies the contiguous CUDA tensor `src` into a new pinned host tensor on
// the device's side stream, after the current stream's work so far; *event
// (free with remat_cuda_event_free) is signalled when the copy is done.
remat_err remat_cuda_copy_out(const remat_tensor* src, remat_tensor** out,
                              void** event);
// Copies `host` to CUDA device `device` on its side stream once `after` is
// signalled; *event is signalled when the copy is done.
remat_err remat_cuda_copy_back(const remat_tensor* host, int device,
                               void* after, remat_tensor** out, void** event);
// Makes the current stream wait for `event` before using `t`, and marks
// `t`'s memory as used on it.
remat_err remat_cuda_use(const remat_tensor* t, void* event);
void remat_cuda_event_free(void* event);

// Early stop without unwinding (docs/semantics.md, rule C17; early_stop.cpp).
// Whether this process can stop a recomputation early (the dispatcher
// fallback is registered, once, on the first call).
int remat_stop_available(void);
// Arms the stop on this thread for one recomputation: with `active`, every
// ATen op passes through the fallback from now until `remat_stop_disarm`;
// without, from `remat_stop_activate` on (the ops before the last few of a
// recomputation cannot make the save that stops it). The messages are a dry
// placeholder's (what reading one says) and an op's without a meta kernel
// (`{op}` is replaced by its name). Returns the thread's previous stop
// state, to be handed to `remat_stop_disarm`, or NULL when the stop is not
// available (nothing is armed then).
void* remat_stop_arm(const char* read_message, size_t read_len,
                     const char* no_meta_message, size_t no_meta_len,
                     int active);
void remat_stop_activate(void);
void remat_stop_disarm(void* previous);
// The armed recomputation on this thread has rebuilt everything: from now
// on every op with a placeholder input runs dry. With `end_op`, returns 1
// when an op the fallback runs is in progress, so that failing the save
// being made ends that op (it then runs dry too); otherwise returns 0, and
// that op's results are made dry when it returns.
int remat_stop_now(int end_op);
// A placeholder of `t`'s layout saying what a dry placeholder says, in *out,
// when this thread's recomputation has stopped; NULL otherwise.
remat_err remat_stop_dry_copy(const remat_tensor* t, remat_tensor** out);
// Whether this thread's armed recomputation has stopped (runs dry).
int remat_stop_is_dry(void);
// Collects the names of the ops that run dry on this thread until
// `remat_dry_log_end`, which returns them one per line (free it with
// `remat_string_free`; NULL only when out of memory).
void remat_dry_log_begin(void);
char* remat_dry_log_end(void);

#ifdef __cplusplus
}
#endif
