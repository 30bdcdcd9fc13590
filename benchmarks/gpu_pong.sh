#!/usr/bin/env bash
# One sitting on a GPU machine (one H100 / H200, 16 cores) that proves the `gpu` preset: its learner's table
# against plain SB3 (and LeanRL, when ../shared/gpu's anchor is prepared beside it), then Pong trained with
# `retrokit train ppo RetroKit/Pong-v0 --preset gpu --network impala` for PONG_S seconds of wall clock, and
# when its 100-game training mean first reached 18, measured from the command's start (start-up, env start
# and compile included). docs/performance.md, "PPO on a GPU", says how to read what comes back.
#
#   bash benchmarks/gpu_machine_setup.sh && bash benchmarks/gpu_pong.sh      # on the GPU machine, from the repo root
#   TABLE=0 PONG_S=240 bash benchmarks/gpu_pong.sh                  # the Pong run alone
#   SMOKE=1 bash benchmarks/gpu_pong.sh                             # on a CPU: the script's own check
#   PROTOCOL=machado TABLE=0 PONG_S=540 bash benchmarks/gpu_pong.sh  # Pong under sticky actions, 2M steps
#   python benchmarks/gpu_suite.py --only profile --out "$OUT/profile.md"  # a second call: where the time goes
#
# Writes under $OUT (default .gpu/out), a few files of at most 16 MiB: table.md (the learner's table),
# pong.md (time to 18), pong.log (the run's console), pong-run.zip (the run dir but its checkpoints:
# model.zip, config.yaml, progress.csv, monitor CSVs, log.txt) and pong-checkpoint-*.zip (its newest
# checkpoint). Parts run under `timeout`; SIGTERM stops the training run with a final checkpoint, as Ctrl-C
# does. PROTOCOL=machado trains under Machado et al.'s protocol (sticky actions 0.25, docs/evaluation.md) with
# the recipe of the best sticky agent on 2 cores (below), for 2M steps; pong-run.zip is then the run to commit
# (`retrokit export`), or with the checkpoint unzipped into checkpoints/, to resume. TRAIN_EXTRA adds flags
# (`--seed 1`).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-.gpu/out}
TABLE=${TABLE:-1}
TABLE_S=${TABLE_S:-200}
PONG_S=${PONG_S:-300}
PROTOCOL=${PROTOCOL:-training}
case "$PROTOCOL" in
    training) STEPS=1e6; PROTOCOL_ARGS=() ;;
    # the recipe of the best sticky agent on 2 cores (pong-ppo-sticky-sf035-ent001-0, docs/results.md) at
    # 32 envs: 128-step rollouts in minibatches of 512 (its gradient steps per sample), rate and clip held
    # for the first 35% of the steps, entropy coefficient 0.001
    machado) STEPS=2e6; PROTOCOL_ARGS=(--protocol machado --set n_steps=128 --set batch_size=512
        --set 'learning_rate={schedule: linear, initial: 2.5e-4, start_fraction: 0.35}'
        --set 'clip_range={schedule: linear, initial: 0.1, start_fraction: 0.35}' --set ent_coef=0.001) ;;
    *) echo "PROTOCOL must be training or machado, got $PROTOCOL" >&2; exit 2 ;;
esac
RUN=${RUN:-${TMPDIR:-/tmp}/pong-gpu-$PROTOCOL}
mkdir -p "$OUT"
if [ "${SMOKE:-0}" = 1 ]; then
    TABLE_ARGS=(--cpu-smoke --only ppo-fast)
    TRAIN_ARGS=(--timesteps 256 --n-envs 2 --set n_steps=32 --set batch_size=32 --device cpu)
else
    TABLE_ARGS=(--only ppo-fast --budget 150)
    TRAIN_ARGS=(--timesteps "$STEPS" --checkpoint-every 200000 --device cuda)
fi
read -ra EXTRA_ARGS <<< "${TRAIN_EXTRA:-}"  # e.g. TRAIN_EXTRA="--seed 1 --set fast_learner.compile=false"
# later --set wins: the smoke's tiny sizes over the recipe's
TRAIN_ARGS=("${PROTOCOL_ARGS[@]}" "${TRAIN_ARGS[@]}" "${EXTRA_ARGS[@]}")

if [ "$TABLE" = 1 ]; then
    timeout "$TABLE_S" python benchmarks/gpu_suite.py "${TABLE_ARGS[@]}" --out "$OUT/table.md" \
        || echo "gpu_suite: rc=$?"
fi

START=$(date +%s.%N)
timeout -s TERM -k 60 "$PONG_S" retrokit train ppo RetroKit/Pong-v0 --preset gpu --network impala \
    "${TRAIN_ARGS[@]}" --run-dir "$RUN" --force 2>&1 | tr '\r' '\n' | tail -n 400 > "$OUT/pong.log"
echo "train: rc=${PIPESTATUS[0]} after $(python -c "import time; print(round(time.time() - $START, 1))") s"
python scripts/time_to_score.py "$RUN" --target 18 --since "$START" > "$OUT/pong.md"
cat "$OUT/pong.md"
python - "$RUN" "$OUT/pong-run.zip" <<'PY'
import os, sys, zipfile
run, dest = sys.argv[1:]
with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
    for root, dirs, files in os.walk(run):
        dirs[:] = [d for d in dirs if d != "checkpoints"]  # the newest comes back beside it
        for name in files:
            zf.write(os.path.join(root, name), os.path.relpath(os.path.join(root, name), run))
PY
# a run stopped before its last step resumes from its newest checkpoint (--resume after unzipping)
NEWEST=$(ls -t "$RUN"/checkpoints/*.zip 2>/dev/null | head -n 1)
[ -n "$NEWEST" ] && cp "$NEWEST" "$OUT/pong-checkpoint-$(basename "$NEWEST")"
ls -la "$OUT"
