#!/usr/bin/env bash
# Runs `zoo train vit` and `zoo train translator` candidates on a lent GPU machine (JAX, no
# TensorFlow) as background processes that outlive one device call while the machine stays
# warm, and reports on them.
# This is how the shipped vit-cifar10 was trained (docs/training-runs.md, 2026-11-25).
#
# Before the first call, in the checkout (both folders are git-ignored):
#   bash ../shared/gpu/wheels.sh                   # Keras and keras-hub wheels into .whl/
#   mkdir -p carry && cp -r ../shared/data/cifar10/cifar10-train-jpg.tar.gz ../shared/data/multi30k carry/
# Each device call (carry: [".whl", "carry"]), chained within the machine's idle time:
#   bash benchmarks/gpu/runs.sh SECONDS [start NAME vit|translator FLAGS... ';'] [kill NAME] [fetch]
# e.g.  bash benchmarks/gpu/runs.sh 240 start A vit --epochs 200 ';' start B vit --learning-rate 1e-4
#       bash benchmarks/gpu/runs.sh 480 kill A fetch
# (`start` fills in the data, the validation split, bfloat16 and the output folder).
# It watches for SECONDS (or until no run is left), printing each run's latest epoch every 30 s;
# it always returns the runs' logs and metrics as $OUT/logs.tgz, and with `fetch` the finished
# run with the best validation score (ViT top-1, translator BLEU) as a model.keras without
# optimizer state, split into 15 MB parts ($OUT/best.keras.part-*; `cat` them back together):
# one kind of run per fetch, since a top-1 and a BLEU do not compare.
set -u
BUDGET=$1
shift
T0=$(date +%s)
if [ ! -d /tmp/site/keras ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
fi
# The runs import a copy of the code, so the next call's re-sent checkout does not change
# files under them.
export PYTHONPATH=/tmp/site:/tmp/code KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false \
  PYTHONUNBUFFERED=1
if [ ! -d /tmp/code ]; then
  mkdir -p /tmp/code && cp -r zoo layers training /tmp/code/
  cp carry/cifar10-train-jpg.tar.gz /tmp/cifar.tgz
  cp -r carry/multi30k /tmp/multi30k
fi
mkdir -p /tmp/runs
FETCH=0
while [ $# -gt 0 ]; do
  case $1 in
    start)
      name=$2
      kind=$3
      shift 3
      case $kind in
        vit) args=(--data /tmp/cifar.tgz --validation-size 5000) ;;
        translator) args=(--multi30k /tmp/multi30k) ;;
        *) echo "start NAME vit|translator ...; got $kind"; exit 2 ;;
      esac
      while [ $# -gt 0 ] && [ "$1" != ";" ]; do args+=("$1"); shift; done
      [ $# -gt 0 ] && shift
      (cd /tmp/code && setsid nohup python3 -m zoo.cli train "$kind" --precision mixed_bfloat16 \
        --output "/tmp/runs/$name" "${args[@]}" > "/tmp/runs/$name.log" 2>&1 < /dev/null &)
      echo "started $name: $kind ${args[*]}" ;;
    kill) pkill -f "runs/$2( |$)"; echo "killed $2"; shift 2 ;;
    fetch) FETCH=1; shift ;;
    *) echo "unknown word: $1"; exit 2 ;;
  esac
done
report() {
  for log in /tmp/runs/*.log; do
    echo "== $(basename "$log" .log): $(grep -Ec '^[0-9]+/[0-9]+ - ' "$log") epochs;" \
      "$(grep -E '^[0-9]+/[0-9]+ - |BLEU' "$log" | tail -1 | cut -c1-200)"
  done
}
while [ $(( $(date +%s) - T0 )) -lt "$BUDGET" ] && pgrep -f "zoo.cli train" > /dev/null; do
  sleep 30
  echo "--- t=$(( $(date +%s) - T0 ))s"
  report
done
report
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
(cd /tmp/runs && tar czf "$OUT/logs.tgz" ./*.log $(ls ./*/metrics.json 2>/dev/null))
if [ "$FETCH" = 1 ]; then
  python3 - <<'PY'
import glob, json, os
from zoo.hub.loader import load  # a model without optimizer state
def score(path):
    validation = json.load(open(path))["validation"]
    return validation.get("top1", validation.get("bleu"))
runs = sorted((score(m), os.path.dirname(m)) for m in glob.glob("/tmp/runs/*/metrics.json"))
print(runs)
if runs:
    load(runs[-1][1] + "/model.keras").save("/tmp/best.keras")
    print("best", runs[-1][1], os.path.getsize("/tmp/best.keras"), "bytes")
PY
  [ -f /tmp/best.keras ] && split -b 15M /tmp/best.keras "$OUT/best.keras.part-"
fi
echo "call took $(( $(date +%s) - T0 ))s"
