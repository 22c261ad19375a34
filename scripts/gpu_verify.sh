#!/usr/bin/env bash
# Verify verimim on a machine with an NVIDIA GPU (no pip install needed there):
#   bash scripts/gpu_verify.sh [EXAMPLES_DIR]
# - the GPU runtime tests; every corpus program with an `// EXPECT:` run with `--target gpu`
#   (compiled host code + kernels) and with `--target gpu --host interp`;
# - `verimim diff` (interpreter before/after every phase + GPU) on the corpus and the examples;
# - the conformance rows of EXAMPLES_DIR with `--target gpu`; the bandwidth and launch benchmarks.
# Wheels in .whl/ (click, rich, pytest, ...) are installed into /tmp/site when present.
set -u
cd "$(dirname "$0")/.."
EX=${1:-../shared/examples}
OUT=${OUT:-/tmp/verimim-gpu}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
for d in runtime phases smt fuzz; do [ -e "verimim/$d" ] || ln -s "../$d" "verimim/$d"; done
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
V="python3 -m verimim.cli"
python3 -c "import verimim.runtime.cuda as c; print('CUDA device available:', c.device_available())"

echo "== runtime tests"
python3 -m pytest tests/runtime -q -p no:cacheprovider -p no:warnings 2>&1 | tail -5

for host in native interp; do
  echo "== corpus on the GPU (run --target gpu --host $host vs // EXPECT:)"
  pass=0; fail=0
  for f in tests/programs/valid/*.mim tests/programs/fuzz_found/*.mim; do
    exp=$(sed -n 's|^// EXPECT: \(-\?[0-9]*\)$|\1|p' "$f" | head -1)
    [ -n "$exp" ] || continue
    args=$(sed -n 's|^// ARGS: ||p' "$f" | head -1)
    got=$($V run "$f" $args --target gpu --host $host --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("result"))' 2>/dev/null)
    if [ "$got" = "$exp" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "MISMATCH $f: expected $exp, gpu $got"; fi
  done
  echo "$pass passed, $fail failed"
done

echo "== verimim diff (interpreter, every phase, GPU)"
pass=0; fail=0
for f in tests/programs/valid/*.mim "$EX"/*.mim; do
  [ -f "$f" ] || continue
  args=$(sed -n 's|^// ARGS: ||p' "$f" | head -1)
  $V diff "$f" $args --json > "$OUT/diff.json" 2>/dev/null; rc=$?
  if [ $rc -eq 3 ]; then fail=$((fail+1)); echo "DIFF $f: $(head -c 400 "$OUT/diff.json")"; else pass=$((pass+1)); fi
done
echo "$pass passed, $fail failed"

if [ -f "$EX/EXPECTED.tsv" ] && [ -f "$EX/conformance" ]; then
  echo "== conformance, run rows on the GPU"
  python3 "$EX/conformance" "$EX" --verimim "$V" --only run --run-args "--target gpu" 2>&1 | tail -15
fi

echo "== benchmarks"
python3 benchmarks/bandwidth.py 2>&1 | tail -12
python3 benchmarks/launch.py 2>&1 | tail -8

echo "== fuzzing on the GPU (no z3 here: phases unverified, still differential)"
python3 -m verimim.cli fuzz --target gpu --no-verify --budget "${FUZZ_BUDGET:-300}" --seed 1 --json --out "$OUT/fuzz" > "$OUT/fuzz.json" 2>/dev/null
python3 -c "import json; d=json.load(open('$OUT/fuzz.json')); print(d['programs'], 'programs,', d['per_second'], '/s,', len(d['failures']), 'failures'); [print(f['kind'], f['message'][:300]) for f in d['failures'][:5]]"
