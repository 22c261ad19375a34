#!/usr/bin/env bash
# Verify verimim on a machine with an NVIDIA GPU (no pip install needed there):
#   bash scripts/gpu_verify.sh [EXAMPLES_DIR]
# - the GPU runtime tests; every corpus program with an `// EXPECT:` run with `--target gpu`
#   (compiled host code + kernels) and with `--target gpu --host interp`;
# - `verimim diff` (interpreter before/after every phase + GPU) on the corpus and the examples;
# - the conformance rows of EXAMPLES_DIR with `--target gpu`; the bandwidth and launch benchmarks.
# SKIP_RUNTIME_TESTS=1 leaves out the runtime tests, HOSTS=native runs the corpus with one host mode only; SKIP_BENCH=1 leaves out the benchmarks, SKIP_DIFF=1 the diff step (about 10 minutes), FUZZ_BUDGET=0 the fuzzing (FUZZ_SEED: its seed).
# Wheels in .whl/ (click, rich, pytest, ...) are installed into /tmp/site when present.
set -u
cd "$(dirname "$0")/.."
EX=${1:-../shared/examples}
OUT=${OUT:-/tmp/verimim-gpu}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
# verimim.<sub> without an installed package: links for this run only (removed on exit)
links=()
for d in runtime phases smt fuzz; do [ -e "verimim/$d" ] || { ln -s "../$d" "verimim/$d" && links+=("verimim/$d"); }; done
trap 'rm -f "${links[@]}"' EXIT
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
V="python3 -m verimim.cli"
python3 -c "import verimim.runtime.cuda as c; print('CUDA device available:', c.device_available())"

if [ "${ONLY:-}" != campaign ]; then
[ -n "${SKIP_RUNTIME_TESTS:-}" ] || {
echo "== runtime tests"
python3 -m pytest tests/runtime -q -p no:cacheprovider -p no:warnings 2>&1 | tail -5
}

for host in ${HOSTS:-native interp}; do
  echo "== corpus on the GPU (run --target gpu --host $host vs // EXPECT:)"
  pass=0; fail=0; limit=0
  for f in tests/programs/valid/*.mim tests/programs/fuzz_found/*.mim; do
    exp=$(sed -n 's|^// EXPECT: \(-\?[0-9]*\)$|\1|p' "$f" | head -1)
    [ -n "$exp" ] || continue
    args=$(sed -n 's|^// ARGS: ||p' "$f" | head -1)
    # the result, or the first error's code and message (E-UNSUPPORTED: a code generator's named limit)
    got=$($V run "$f" $args --target gpu --host $host --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
errs = [x for x in d.get("diagnostics", []) if x.get("severity") == "error"]
print(d.get("result") if d.get("result") is not None or not errs else errs[0]["code"] + " " + errs[0]["message"][:160])' 2>/dev/null)
    if [ "$got" = "$exp" ]; then pass=$((pass+1))
    elif [ "${got#E-UNSUPPORTED}" != "$got" ]; then limit=$((limit+1)); echo "LIMIT $f: $got"
    else fail=$((fail+1)); echo "MISMATCH $f: expected $exp, gpu $got"; fi
  done
  echo "$pass passed, $fail failed, $limit refused by a named limit (E-UNSUPPORTED)"
done

if [ -z "${SKIP_DIFF:-}" ]; then
echo "== verimim diff (interpreter, every phase, GPU)"
pass=0; fail=0
for f in tests/programs/valid/*.mim "$EX"/*.mim; do
  [ -f "$f" ] || continue
  args=$(sed -n 's|^// ARGS: ||p' "$f" | head -1)
  $V diff "$f" $args --json > "$OUT/diff.json" 2>/dev/null; rc=$?
  if [ $rc -eq 3 ]; then fail=$((fail+1)); echo "DIFF $f: $(head -c 400 "$OUT/diff.json")"; else pass=$((pass+1)); fi
done
echo "$pass passed, $fail failed"
fi

if [ -f "$EX/EXPECTED.tsv" ] && [ -f "$EX/conformance" ]; then
  echo "== conformance, run rows on the GPU"
  python3 "$EX/conformance" "$EX" --verimim "$V" --only run --run-args "--target gpu" 2>&1 | tail -15
fi

if [ -z "${SKIP_BENCH:-}" ]; then
echo "== benchmarks"
python3 benchmarks/bandwidth.py 2>&1 | tail -12
python3 benchmarks/launch.py 2>&1 | tail -8
fi

[ "${FUZZ_BUDGET:-300}" = 0 ] || {
echo "== fuzzing on the GPU (no z3 here: phases unverified, still differential)"
python3 -m verimim.cli fuzz --target gpu --no-verify --budget "${FUZZ_BUDGET:-300}" --seed "${FUZZ_SEED:-1}" --json --out "$OUT/fuzz" > "$OUT/fuzz.json" 2>/dev/null
python3 -c "import json; d=json.load(open('$OUT/fuzz.json')); print(d['programs'], 'programs,', d['per_second'], '/s,', len(d['failures']), 'failures'); [print(f['kind'], f['message'][:300]) for f in d['failures'][:5]]"
}
fi

# A campaign on Dask with --target gpu: one worker per GPU of CUDA_VISIBLE_DEVICES (fuzz/cluster.py);
# nvidia-smi, sampled, shows which worker processes ran kernels on which GPU.
if [ "${CAMPAIGN_BUDGET:-0}" != 0 ]; then
  echo "== a GPU campaign (Dask, --target gpu, ${CAMPAIGN_WORKERS:-2} workers, ${CAMPAIGN_BUDGET} s)"
  (while sleep 3; do nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader; done) > "$OUT/gpu_apps.txt" 2>&1 &
  sampler=$!
  python3 -m verimim.cli fuzz --campaign "$OUT/campaign" --target gpu --workers "${CAMPAIGN_WORKERS:-2}" \
    --budget "$CAMPAIGN_BUDGET" --seed "${CAMPAIGN_SEED:-7}" --json > "$OUT/campaign.json" 2> "$OUT/campaign.err"
  echo "campaign exit $?"
  kill $sampler
  [ -f "$OUT/campaign/journal.sqlite" ] || { tail -5 "$OUT/campaign.err"; exit 1; }
  python3 -m verimim.cli fuzz report "$OUT/campaign" --json > "$OUT/report.json"
  python3 - "$OUT" <<'PY'
import collections, json, sys
out = sys.argv[1]
d = json.load(open(f"{out}/report.json"))
print(d["programs"], "programs;", "verdicts", {k: v for k, v in d["verdicts"].items() if v}, ";", len(d["failures"]), "failures")
for f in d["failures"][:5]:
    print(" ", f["signature"], f.get("message", "")[:300])
import sqlite3
rows = sqlite3.connect(f"{out}/campaign/journal.sqlite").execute("SELECT times, worker FROM programs").fetchall()
on_gpu = collections.Counter(w for t, w in rows if '"gpu"' in (t or ""))
print("programs compared on the GPU, by worker:", dict(on_gpu))
apps = collections.defaultdict(set)
for line in open(f"{out}/gpu_apps.txt"):
    parts = [x.strip() for x in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit():
        apps[parts[1]].add(parts[0])
print("processes on each GPU:", {g: sorted(p) for g, p in apps.items()})
PY
fi
