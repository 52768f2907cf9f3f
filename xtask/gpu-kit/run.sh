#!/usr/bin/env bash
# remat's GPU kit (docs/gpu.md): runs the GPU checks, the sharded units'
# check, the training example
# on the medium and deep configs under every policy and one budget plan,
# and the per-region chain, against this machine's own libtorch; writes
# results/results.md. Every step has a time limit; a failing or timed-out
# step is recorded and the run goes on. Usage:
#   bash run.sh            on the GPU machine (cuda:0)
#   bash run.sh --smoke    on a CPU: the CUDA checks skip, training is tiny
# REMAT_TORCH_LIB=DIR overrides where libtorch's libraries are found.
set -u

KIT=$(cd "$(dirname "$0")" && pwd)
OUT=${REMAT_KIT_OUT:-$KIT/results}
SMOKE=0
[ "${1:-}" = "--smoke" ] && SMOKE=1
rm -rf "$OUT"
mkdir -p "$OUT"
STEPS_TSV=$OUT/steps.tsv
: > "$STEPS_TSV"
started=$(date +%s)

if [ -n "${REMAT_TORCH_LIB:-}" ]; then
  TORCH_LIB=$REMAT_TORCH_LIB
else
  TORCH_DIR=$(python3 -c 'import torch,os; print(os.path.dirname(torch.__file__))' 2>"$OUT/python.log")
  TORCH_LIB=$TORCH_DIR/lib
fi
if [ ! -e "$TORCH_LIB/libtorch_cpu.so" ]; then
  echo "run.sh: no libtorch in '$TORCH_LIB' (python3 could not import torch? see $OUT/python.log); set REMAT_TORCH_LIB" >&2
  exit 2
fi
export LD_LIBRARY_PATH=$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# cuBLAS is deterministic only with a fixed workspace, read at its start.
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
TORCH_VERSION=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)

if [ "$SMOKE" = 1 ]; then
  DEVICE=cpu
  # Both training slots on the small config, a few steps: the smoke run
  # checks the kit's plumbing, not the numbers.
  CONFIGS="small:3:600KiB small:2:600KiB"
  LIMIT_TRAIN=240
  CHAIN_ROUNDS=2
else
  DEVICE=${REMAT_KIT_DEVICE:-cuda:0}
  # config:steps:budget; the budgets lie between full's and none's bytes.
  CONFIGS="medium:60:40MiB deep:20:300MiB"
  LIMIT_TRAIN=150
  CHAIN_ROUNDS=5
fi

# step NAME LIMIT_SECONDS COMMAND...: runs it with a time limit, its output
# in NAME.log, and records the outcome.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  echo "run.sh: $name (limit ${limit}s)" >&2
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local status=pass
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    status="fail (timed out after ${limit}s)"
  elif [ $rc != 0 ]; then
    status="fail (exit $rc)"
  fi
  printf '%s\t%s\t%s\n' "$name" "$status" "$(( $(date +%s) - t0 ))" >> "$STEPS_TSV"
}

export REMAT_GPU_RESULTS=$OUT/checks.tsv
: > "$REMAT_GPU_RESULTS"
step gpu_checks 180 "$KIT/bin/gpu_checks" --test-threads=1
unset REMAT_GPU_RESULTS
# Sharded units in a world of one over NCCL (on a CPU: over Gloo).
step fsdp_cuda 120 "$KIT/bin/dist_checks" fsdp_cuda --test-threads=1 --nocapture

for slot in $CONFIGS; do
  IFS=: read -r config steps budget <<< "$slot"
  name=train_${config}
  [ -e "$OUT/$name" ] && name=${name}_2
  step "$name" "$LIMIT_TRAIN" "$KIT/bin/train_gpt" --config "$config" --device "$DEVICE" \
    --steps "$steps" --budget "$budget" --check --out "$OUT/$name"
  echo "$name $config $steps $budget" >> "$OUT/train_runs.txt"
done

step chain 60 "$KIT/bin/perf" --device "$DEVICE" chain "$CHAIN_ROUNDS"

# --- results.md ----------------------------------------------------------
R=$OUT/results.md
{
  echo "# remat GPU kit results"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- host: $(hostname)"
  if [ "$DEVICE" = cpu ]; then
    echo "- device: cpu (smoke run)"
  else
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 2>/dev/null || echo unknown)
    echo "- device: $DEVICE ($gpu)"
  fi
  echo "- libtorch: torch $TORCH_VERSION from $TORCH_LIB"
  echo "- kit: $(tr '\n' ' ' < "$KIT/BUILD" 2>/dev/null)"
  echo "- wall time: $(( $(date +%s) - started )) s"
  echo
  echo "## Steps"
  echo
  echo "| step | result | seconds | log |"
  echo "| --- | --- | --- | --- |"
  while IFS=$'\t' read -r name status secs; do
    echo "| $name | $status | $secs | $name.log |"
  done < "$STEPS_TSV"
  echo
  echo "## Checks"
  echo
  echo "| check | result | detail |"
  echo "| --- | --- | --- |"
  if [ -s "$OUT/checks.tsv" ]; then
    while IFS=$'\t' read -r name status detail; do
      [ "$status" = skipped ] && status="skipped: no CUDA device" && detail=""
      echo "| $name | $status | ${detail//|/\\|} |"
    done < "$OUT/checks.tsv"
  else
    echo "| (none recorded) | fail | see gpu_checks.log |"
  fi
  while read -r name config steps budget; do
    tsv=$OUT/$name/summary.tsv
    echo
    echo "## Training: $config config, $steps steps, budget $budget ($name)"
    echo
    if [ ! -s "$tsv" ]; then
      echo "no summary: see $name.log"
      continue
    fi
    awk -F'\t' '
      function mib(b) { return (b == "-") ? "-" : sprintf("%.2f MiB", b / 1048576) }
      NR == 1 { next }
      { policy[NR] = $1; step[NR] = $2; saved[NR] = $3; rss[NR] = $4; dev[NR] = $5
        pk[NR] = $6; mk[NR] = $7; pp[NR] = $8; loss[NR] = $9
        if ($1 == "none") base = $2 }
      END {
        print "| policy | median step | vs none | saved for backward | peak allocated | peak resident | last loss |"
        print "| --- | --- | --- | --- | --- | --- | --- |"
        for (i = 2; i <= NR; i++) {
          ratio = (base > 0) ? sprintf("%.2fx", step[i] / base) : "-"
          printf "| %s | %.2f ms | %s | %s | %s | %s | %s |\n", policy[i], step[i] / 1e6, ratio, mib(saved[i]), mib(dev[i]), mib(rss[i]), loss[i]
        }
        for (i = 2; i <= NR; i++) if (pk[i] != "-") {
          print ""
          print "| planner | predicted | measured |"
          print "| --- | --- | --- |"
          verdict = (pk[i] == mk[i]) ? "equal" : "DIFFERENT"
          printf "| kept for backward (remat count) | %s | %s (%s) |\n", mib(pk[i]), mib(mk[i]), verdict
          printf "| peak (backward) / allocator peak over the steps | %s | %s |\n", mib(pp[i]), mib(dev[i])
        }
      }' "$tsv"
    grep -E "^(NOT EQUAL|NOT FLAT)" "$OUT/$name.log" | sed 's/^/    /'
  done < "$OUT/train_runs.txt"
  echo
  echo "## Per-region chain ($DEVICE)"
  echo
  echo '```'
  grep "per region" "$OUT/chain.log" || echo "no result: see chain.log"
  echo '```'
} > "$R"
echo "run.sh: results in $R" >&2
grep -q "| fail" "$R" && exit 1
exit 0
