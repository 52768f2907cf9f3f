#!/usr/bin/env bash
# Where a step's time goes, remat against torch.utils.checkpoint: one fresh
# process per implementation and policy runs STEPS steps of the medium
# reference model on one thread under `perf record`, and the samples are
# counted per shared object (libtorch's kernels, the kernel's page faults,
# the interpreter, remat's own code). docs/performance.md, "What a profile
# of a step found", reads these counts; run after `cargo xtask bench` has
# built the bench and installed the peers:
#
#   bash bench/profile.sh [STEPS] [POLICY...]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6}
policies=(none full selective save_mlp)
if [ $# -gt 1 ]; then
    policies=("${@:2}")
fi
exe=$(ls -t target/release/deps/perf-* | grep -v '\.d$' | head -1)
torch=$(readlink -f .libtorch)
python=$(dirname "$(dirname "$(dirname "$(dirname "$torch")")")")/bin/python
export LD_LIBRARY_PATH="$torch/lib" PYTHONWARNINGS=ignore REMAT_BENCH_THREADS=1
out=$(mktemp -d)
for policy in "${policies[@]}"; do
    perf record -q -F 999 -o "$out/remat-$policy" "$exe" --threads 1 rss "$policy" medium "$steps" >"$out/remat-$policy.json"
    perf record -q -F 999 -o "$out/torch-$policy" "$python" bench/python/peers.py rss torch "$policy" medium "$steps" >"$out/torch-$policy.json" 2>/dev/null
done
for policy in "${policies[@]}"; do
    for imp in remat torch; do
        echo "== $imp $policy: $(cat "$out/$imp-$policy.json")"
        perf report -i "$out/$imp-$policy" --no-children --sort dso --stdio -n 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -4
    done
done
rm -rf "$out"
