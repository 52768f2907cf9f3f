"""The Python peers of `cargo xtask bench` (docs/performance.md).

The reference model (docs/reference-model.md) written op for op as
remat_reference writes it, run under `torch_remat` 0.2.0 and under
`torch.utils.checkpoint` (non-reentrant), in the same libtorch as the Rust
side. Parameters and batches come from the same seeds in the same order, so
both sides compute the same numbers (the bench compares the losses).

Two ways to run it:
- `peers.py worker`: a long-lived process that answers one JSON command per
  line on stdin with one JSON line on stdout, so that the Rust bench can
  interleave Python and Rust variants round by round;
- `peers.py rss <impl> <policy> <config> <steps>`: peak resident memory of
  one process (run it with MALLOC_MMAP_THRESHOLD_=65536, as the bench runs its
  Rust memory children). The bench does not run it (a `deep` child takes
  minutes per process on a 2-core machine); it is here for a manual check.

Only the benchmark uses this file; `cargo xtask demo` and `test` never do.
"""

import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint as torch_checkpoint,
    create_selective_checkpoint_contexts,
)

try:
    import torch_remat as remat
except ImportError:  # the worker reports it; `rss` needs it only for torch_remat
    remat = None

CONFIGS = {
    "small": dict(d=64, h=4, t=32, b=2, l=2),
    "medium": dict(d=256, h=8, t=256, b=8, l=4),
    "deep": dict(d=256, h=8, t=256, b=8, l=32),
}
VOCAB = 256
MODEL_SEED = 0
BATCH_SEED = 1


class Block:
    def __init__(self, d, make):
        self.ln1_w = make("ones", [d])
        self.ln1_b = make("zeros", [d])
        self.qkv_w = make("normal", [3 * d, d])
        self.qkv_b = make("zeros", [3 * d])
        self.proj_w = make("normal", [d, d])
        self.proj_b = make("zeros", [d])
        self.ln2_w = make("ones", [d])
        self.ln2_b = make("zeros", [d])
        self.fc1_w = make("normal", [4 * d, d])
        self.fc1_b = make("zeros", [4 * d])
        self.fc2_w = make("normal", [d, 4 * d])
        self.fc2_b = make("zeros", [d])

    def params(self):
        return list(vars(self).values())


class Model:
    """Parameters drawn in remat_reference's order (blocks first)."""

    def __init__(self, cfg, seed=MODEL_SEED):
        torch.manual_seed(seed)

        def make(init, shape):
            if init == "normal":
                t = torch.randn(shape) * 0.02
            elif init == "zeros":
                t = torch.zeros(shape)
            else:
                t = torch.ones(shape)
            return t.requires_grad_(True)

        self.cfg = cfg
        d = cfg["d"]
        self.blocks = [Block(d, make) for _ in range(cfg["l"])]
        self.tok_emb = make("normal", [VOCAB, d])
        self.pos_emb = make("normal", [cfg["t"], d])
        self.lnf_w = make("ones", [d])
        self.lnf_b = make("zeros", [d])
        self.head_w = make("normal", [VOCAB, d])
        self.head_b = make("zeros", [VOCAB])

    def params(self):
        out = [p for b in self.blocks for p in b.params()]
        return out + [self.tok_emb, self.pos_emb, self.lnf_w, self.lnf_b, self.head_w, self.head_b]

    def zero_grad(self):
        # In place, as the Rust side does (tch's `zero_grad`): the backward
        # then accumulates into the same buffers on both sides.
        for p in self.params():
            if p.grad is not None:
                p.grad.zero_()


def batch(cfg, seed=BATCH_SEED):
    # The same bytes as remat_reference::model::batch: xorshift64, not
    # torch's global generator.
    mask = (1 << 64) - 1
    state = (seed ^ 0x9E3779B97F4A7C15) & mask
    tokens = []
    for _ in range(cfg["b"] * (cfg["t"] + 1)):
        state ^= (state << 13) & mask
        state ^= state >> 7
        state ^= (state << 17) & mask
        tokens.append(state % VOCAB)
    data = torch.tensor(tokens, dtype=torch.int64).view(cfg["b"], cfg["t"] + 1)
    return data[:, : cfg["t"]].contiguous(), data[:, 1:].contiguous()


def attention(p, h, cfg):
    d, heads, t, b = cfg["d"], cfg["h"], cfg["t"], cfg["b"]
    qkv = F.linear(h, p.qkv_w, p.qkv_b).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    scores = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(d // heads))
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = scores.softmax(-1, dtype=torch.float32)
    ctx = probs.matmul(v).transpose(1, 2).reshape(b, t, d)
    return F.linear(ctx, p.proj_w, p.proj_b)


def mlp(p, h):
    return F.linear(F.gelu(F.linear(h, p.fc1_w, p.fc1_b), approximate="none"), p.fc2_w, p.fc2_b)


def ln(x, w, b, d):
    return F.layer_norm(x, [d], w, b, 1e-5)


# --- torch_remat: the block under each policy (docs/reference-model.md, "Policies").


def remat_block(p, x, cfg, policy):
    d = cfg["d"]
    h = ln(x, p.ln1_w, p.ln1_b, d)
    if policy == "selective":
        a = remat.region(lambda h: attention(p, h, cfg), "attention", recompute=False)(h)
        remat.recompute_needs_tensor(a)
    elif policy == "save_mlp":
        a = remat.region(lambda h: attention(p, h, cfg), "attention", recompute=True)(h)
    else:
        a = attention(p, h, cfg)
    x = x + a
    h = ln(x, p.ln2_w, p.ln2_b, d)
    if policy == "selective":
        m = remat.region(lambda h: mlp(p, h), "mlp", recompute=True)(h)
    elif policy == "save_mlp":
        m = remat.region(lambda h: mlp(p, h), "mlp", recompute=False)(h)
        remat.recompute_needs_tensor(m)
    else:
        m = mlp(p, h)
    return x + m


# --- torch.utils.checkpoint: `full` checkpoints each block; `selective` and
# `save_mlp` use selective activation checkpointing (SAC) with every op of the
# saved part MUST_SAVE and the rest PREFER_RECOMPUTE: the same split.

_SAVING = [False]
_SAC_CONTEXTS = []  # the caching modes of the running forward (for bytes)


def _policy_fn(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if _SAVING[0] else CheckpointPolicy.PREFER_RECOMPUTE


def _sac_context():
    contexts = create_selective_checkpoint_contexts(_policy_fn)
    _SAC_CONTEXTS.append(contexts[0])
    return contexts


def _saving(flag, f, *args):
    _SAVING[0] = flag
    try:
        return f(*args)
    finally:
        _SAVING[0] = False


def torch_block(p, x, cfg, policy):
    d = cfg["d"]
    h = ln(x, p.ln1_w, p.ln1_b, d)
    a = _saving(policy == "selective", attention, p, h, cfg)
    x = x + a
    h = ln(x, p.ln2_w, p.ln2_b, d)
    m = _saving(policy == "save_mlp", mlp, p, h)
    return x + m


def loss(model, tokens, targets, impl, policy):
    cfg = model.cfg
    d, t, b = cfg["d"], cfg["t"], cfg["b"]
    tok = F.embedding(tokens, model.tok_emb)
    pos = F.embedding(torch.arange(t), model.pos_emb)
    x = tok + pos
    for i, p in enumerate(model.blocks):
        if policy == "none":
            x = torch_block(p, x, cfg, "none")
        elif impl == "torch_remat":
            body = lambda x, p=p: remat_block(p, x, cfg, policy)
            x = remat.checkpoint(region_name=f"layers.{i}")(body)(x)
        elif policy == "full":
            x = torch_checkpoint(lambda x, p=p: torch_block(p, x, cfg, "none"), x, use_reentrant=False)
        else:
            x = torch_checkpoint(
                lambda x, p=p: torch_block(p, x, cfg, policy),
                x,
                use_reentrant=False,
                context_fn=_sac_context,
            )
    x = ln(x, model.lnf_w, model.lnf_b, d)
    logits = F.linear(x, model.head_w, model.head_b)
    return F.cross_entropy(logits.view(b * t, VOCAB), targets.view(b * t))


# --- Bytes saved for backward at the forward->backward point.


def _storage_bytes(seen, t):
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return 0
    s = t.untyped_storage()
    key = s.data_ptr()
    if key == 0 or key in seen:
        return 0
    seen.add(key)
    return s.nbytes()


def saved_bytes(model, tokens, targets, impl, policy):
    """torch_remat: its own whole-model report. torch: unique storages that a
    saved-tensors hook sees (saves outside checkpoints and checkpoint inputs;
    parameters and views of them are not counted) plus the SAC cache of
    MUST_SAVE outputs."""
    model.zero_grad()
    if impl == "torch_remat" and policy != "none":
        out = loss(model, tokens, targets, impl, policy)
        report = remat.format_saved_tensors_report(roots=out)
        first = report.splitlines()[0]  # "saved for backward: X resident -- ..."
        out.backward()
        return {"bytes": _parse_bytes(first.split(":", 1)[1].split("resident")[0].strip()),
                "report": first}
    seen, total = set(), [0]
    # Parameters and their views (`linear` saves the weight's transpose) are
    # not activation memory; remat's count skips them by storage too.
    params = {p.untyped_storage().data_ptr() for p in model.params()}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            total[0] += _storage_bytes(seen, t)
        return t

    _SAC_CONTEXTS.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = loss(model, tokens, targets, impl, policy)
    for mode in _SAC_CONTEXTS:
        for per_op in mode.storage.values():
            for value in per_op.values():
                for leaf in torch.utils._pytree.tree_leaves(value):
                    if hasattr(leaf, "val"):
                        total[0] += _storage_bytes(seen, leaf.val)
    _SAC_CONTEXTS.clear()
    out.backward()
    return {"bytes": total[0]}


def _parse_bytes(text):
    number, unit = text.split()
    scale = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[unit]
    return int(round(float(number) * scale))


# --- Section 3: the per-region chain.

CHAIN = 200


def chain_run(impl, regions, backward):
    x = torch.ones(1, requires_grad=True)

    def plain(x):
        for _ in range(CHAIN):
            x = x * 1.0001
        return x

    def with_regions(x):
        f = lambda x: x * 1.0001
        for i in range(CHAIN):
            x = remat.region(f, f"r{i}", recompute=(i % 2 == 1))(x)
        return x

    flags = [False]

    def sac_policy(ctx, op, *args, **kwargs):
        flags[0] = not flags[0]
        return CheckpointPolicy.MUST_SAVE if flags[0] else CheckpointPolicy.PREFER_RECOMPUTE

    # As the Rust side does: a request above glibc's small bins, untimed,
    # consolidates what the previous run freed before the clock starts.
    settle = bytearray(4096)
    del settle
    start = time.perf_counter()
    if impl == "torch_remat":
        y = remat.checkpoint(region_name="chain")(with_regions if regions else plain)(x)
    elif regions:
        ctx = lambda: create_selective_checkpoint_contexts(sac_policy)
        y = torch_checkpoint(plain, x, use_reentrant=False, context_fn=ctx)
    else:
        y = torch_checkpoint(plain, x, use_reentrant=False)
    if backward:
        y.sum().backward()
    return time.perf_counter() - start


# --- Resident memory of a process running `steps` steps.


def vm_status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                fields[key] = int(value.split()[0]) * 1024
    return fields


def threads():
    # The bench's `--threads`, passed on by the Rust side.
    return int(os.environ.get("REMAT_BENCH_THREADS", "1"))


def rss_main(impl, policy, config, steps):
    torch.set_num_threads(threads())
    cfg = CONFIGS[config]
    model = Model(cfg)
    tokens, targets = batch(cfg)
    forward_growth = None
    # Minor page faults and seconds of the steps after the first, per step
    # (as the Rust child reports them).
    faults, secs = 0, 0.0
    for step in range(steps):
        model.zero_grad()
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        before = vm_status()["VmRSS"]
        out = loss(model, tokens, targets, impl, policy)
        after = vm_status()["VmRSS"]
        if step == 0:
            forward_growth = after - before
        out.backward()
        del out
        if step > 0:
            faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            secs += time.perf_counter() - t0
    later = max(steps - 1, 1)
    print(
        json.dumps(
            {
                "hwm": vm_status()["VmHWM"],
                "forward_growth": forward_growth,
                "faults_per_step": faults / later,
                "secs_per_step": secs / later,
            }
        )
    )


# --- The worker.


def worker_main():
    torch.set_num_threads(threads())
    models = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            reply = handle(cmd, models)
        except Exception as e:  # reported to the bench, which stops
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        if cmd["cmd"] == "quit":
            return


def _version(package):
    import importlib.metadata

    return importlib.metadata.version(package)


def handle(cmd, models):
    kind = cmd["cmd"]
    if kind == "hello":
        return {
            "torch": torch.__version__,
            "torch_remat": _version("torch_remat") if remat else None,
            "python": sys.version.split()[0],
            "threads": torch.get_num_threads(),
        }
    if kind == "quit":
        return {}
    if kind == "chain":
        return {"secs": chain_run(cmd["impl"], cmd["regions"], cmd["backward"])}
    if kind == "threads":
        # Section 1 runs at several thread counts in one worker.
        torch.set_num_threads(cmd["n"])
        return {"threads": torch.get_num_threads()}
    config = cmd["config"]
    if config not in models:
        cfg = CONFIGS[config]
        models[config] = (Model(cfg), *batch(cfg))
    model, tokens, targets = models[config]
    if kind == "step":
        model.zero_grad()
        start = time.perf_counter()
        out = loss(model, tokens, targets, cmd["impl"], cmd["policy"])
        out.backward()
        secs = time.perf_counter() - start
        return {"secs": secs, "loss": out.item()}
    if kind == "bytes":
        return saved_bytes(model, tokens, targets, cmd["impl"], cmd["policy"])
    raise ValueError(f"unknown command {kind!r}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker_main()
    elif sys.argv[1:2] == ["rss"]:
        rss_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit("usage: peers.py worker | rss <impl> <policy> <config> <steps>")
