#!/usr/bin/env bash
# The README's example is true: jobs/quickstart.yaml runs as the README runs it (mpirun -np 2) and
# the README's Python snippets read its results, with h5py and with pandas (through export).
source "$(dirname "$0")/lib.sh"
need_stories
ROOT=$(cd "$HERE/../.." && pwd)
$PY -c "import h5py, pandas" 2>/dev/null || { echo "SKIP: $PY lacks h5py or pandas (scripts/setup.sh installs them)"; exit 77; }
# A copy of the repository's layout: the README's paths (build/tpbatch, jobs/, models/, out/) are
# relative to the repository root.
mkdir -p "$WORK/repo/build" "$WORK/repo/out"
ln -s "$TPBATCH" "$WORK/repo/build/tpbatch"
ln -s "$ROOT/models" "$WORK/repo/models"
cp -r "$ROOT/jobs" "$WORK/repo/jobs"
cd "$WORK/repo"
mpirun_tpbatch 2 jobs/quickstart.yaml 2>"$WORK/log" || { tail -20 "$WORK/log"; fail "jobs/quickstart.yaml failed"; }
lines=$(wc -l <jobs/quickstart.jsonl)

# The README's ```python blocks under "Reading the results", in order.
$PY - "$ROOT/README.md" "$WORK" <<'PY'
import re, sys
readme, work = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
section = text.split("## Reading the results", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
assert len(blocks) == 2, f"expected the h5py and the pandas snippet, found {len(blocks)} python blocks"
for i, b in enumerate(blocks):
    open(f"{work}/snippet{i}.py", "w").write(b)
PY
$PY "$WORK/snippet0.py" >"$WORK/h5py.out" || fail "the README's h5py snippet failed"
[ "$(grep -c '^q[0-9]' "$WORK/h5py.out")" = "$lines" ] || { cat "$WORK/h5py.out"; fail "the h5py snippet did not print one line per input row"; }
{ cat "$WORK/snippet1.py"; echo "assert len(df) == $lines and (df['finish_reason'] == 'length').all(), df"; } >"$WORK/check_pandas_snippet.py"
$PY "$WORK/check_pandas_snippet.py" || fail "the README's pandas snippet failed or read the wrong rows"
echo "README example: the job ran, h5py and pandas read its $lines rows"
