// The C ABI of remat_distributed's bridge to c10d (see src/bridge/ffi.rs).
// Tensors cross as `at::Tensor*` (tch's C_tensor) and are borrowed: C++
// never deletes one it is handed. Every function that can fail returns
// a malloc'd error string (null on success) and never throws.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
namespace at {
class Tensor;
}
typedef at::Tensor remat_dist_tensor;
extern "C" {
#else
typedef struct remat_dist_tensor remat_dist_tensor;
#endif

typedef char* remat_dist_err;
typedef struct remat_dist_group remat_dist_group;
typedef struct remat_dist_reducer remat_dist_reducer;

void remat_dist_string_free(char* s);

// Joins the group: rank 0 hosts the TCPStore at host:port, every rank
// connects to it, then Gloo connects every pair through the store. Gloo's
// device binds to `device_host` (an address or host name of this machine).
// With `nccl` (only in a build with the `cuda` feature), CUDA tensors are
// reduced by NCCL, CPU ones still by Gloo.
remat_dist_err remat_dist_group_new(const char* host, uint16_t port, int rank, int world_size,
                                    int64_t timeout_ms, const char* device_host, int nccl,
                                    remat_dist_group** out);
void remat_dist_group_free(remat_dist_group* g);

// Sum over the ranks, in place (Gloo has no average: Rust divides).
remat_dist_err remat_dist_all_reduce_sum(remat_dist_group* g, remat_dist_tensor* t);
remat_dist_err remat_dist_broadcast(remat_dist_group* g, remat_dist_tensor* t, int root);
remat_dist_err remat_dist_barrier(remat_dist_group* g);
// c10d::broadcast_coalesced from rank 0, written into the tensors under no_grad.
remat_dist_err remat_dist_broadcast_coalesced(remat_dist_group* g, remat_dist_tensor* const* ts,
                                              size_t n, int64_t buffer_bytes);

// A c10d::Reducer over `params`, buckets from compute_bucket_assignment_by_size
// with limits {first_bucket_bytes, bucket_bytes}.
remat_dist_err remat_dist_reducer_new(remat_dist_group* g, remat_dist_tensor* const* params,
                                      size_t n, int64_t first_bucket_bytes, int64_t bucket_bytes,
                                      int find_unused, int static_graph,
                                      remat_dist_reducer** out);
remat_dist_err remat_dist_reducer_free(remat_dist_reducer* r);
// What Python's DDP does at the start of a forward (rebuild_buckets) and
// after it (prepare_for_backward; the outputs are searched for unused
// parameters with find_unused and no static graph, and with a static graph
// its first backward reduces every bucket when it ends).
remat_dist_err remat_dist_reducer_rebuild_buckets(remat_dist_reducer* r);
remat_dist_err remat_dist_reducer_prepare(remat_dist_reducer* r, remat_dist_tensor* const* outputs,
                                          size_t n);
// The buckets as parameter indices: writes up to `cap` indices (bucket
// after bucket) into `idx` and each bucket's length into `lens` (up to
// `lens_cap`); returns the bucket count in *n_buckets.
// After the next gradient of `t` is computed, how many buckets had been
// launched (read back with remat_dist_reducer_stats). `t` must require grad.
remat_dist_err remat_dist_reducer_watch(remat_dist_reducer* r, remat_dist_tensor* t);
// The backward since the last prepare: each parameter's reports (runs of its
// AccumulateGrad node) into `reports` (n_params), each launched bucket's
// launch and completion ns into `launches` (pairs, up to launch_cap pairs;
// completion -1 while running), and each watched tensor's count of launched
// buckets into `watched` (up to watch_cap). The counts go to *n_launches and
// *n_watched.
remat_dist_err remat_dist_reducer_stats(remat_dist_reducer* r, int64_t* reports, size_t n_params,
                                        int64_t* launches, size_t launch_cap, size_t* n_launches,
                                        int64_t* watched, size_t watch_cap, size_t* n_watched);
remat_dist_err remat_dist_reducer_buckets(remat_dist_reducer* r, size_t* idx, size_t cap,
                                          size_t* lens, size_t lens_cap, size_t* n_buckets);

// Sharded units (fsdp.cpp; docs/semantics.md, section F). A unit's
// parameters view one flat buffer whose bytes exist only while the unit is
// gathered; `shard` (this rank's slice, made by Rust with the size
// ceil(total / world)) is filled here and is what the optimizer steps.
// `param_dtype` and `reduce_dtype` are at::ScalarType codes, or -1 for the
// parameters' own dtype.
typedef struct remat_dist_fsdp remat_dist_fsdp;
// With `rank_order` gradients are summed in rank order (all-to-all and a
// local sum) instead of by the backend's reduce-scatter.
remat_dist_err remat_dist_fsdp_new(remat_dist_group* g, int reshard_after_forward, int prefetch,
                                   int rank_order, remat_dist_fsdp** out);
remat_dist_err remat_dist_fsdp_free(remat_dist_fsdp* f);
remat_dist_err remat_dist_fsdp_add_unit(remat_dist_fsdp* f, const char* name,
                                        const char* const* param_names,
                                        remat_dist_tensor* const* params, size_t n,
                                        remat_dist_tensor* shard, int param_dtype,
                                        int reduce_dtype, size_t* index);
// Around a unit's forward: gathers it (and prefetches the next), then hooks
// the outputs' gradients to gather it again for backward and frees it.
// With `recomputing` (a checkpoint's replay) it gathers and stays gathered.
remat_dist_err remat_dist_fsdp_pre_forward(remat_dist_fsdp* f, size_t i, int recomputing);
remat_dist_err remat_dist_fsdp_post_forward(remat_dist_fsdp* f, size_t i,
                                            remat_dist_tensor* const* outputs, size_t n,
                                            int recomputing);
// All-gathers unit i's shards into `out` (its padded length), leaving the
// unit's own buffer alone: for full state dicts.
remat_dist_err remat_dist_fsdp_gather_into(remat_dist_fsdp* f, size_t i, remat_dist_tensor* out);
// The last step's events as (kind, unit, ns) triples, up to `cap` of them;
// the count goes to *n.
remat_dist_err remat_dist_fsdp_events(remat_dist_fsdp* f, int64_t* buf, size_t cap, size_t* n);
// Bytes the units' flat buffers hold now, and the most they held at once
// during the last backward.
remat_dist_err remat_dist_fsdp_gathered_bytes(remat_dist_fsdp* f, size_t* now,
                                              size_t* backward_peak);

#ifdef __cplusplus
}
#endif
