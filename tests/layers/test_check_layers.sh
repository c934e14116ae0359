#!/usr/bin/env bash
# The layers.includes test: every #include of src/ and kernels/ follows src/layers.txt, and the
# check itself catches an upward include (a tiny tree where common includes engine) and a folder
# missing from the table.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK="$ROOT/scripts/check_layers.py"
python3 "$CHECK" "$ROOT"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src/common" "$WORK/src/engine"
printf 'common src/common -\nengine src/engine common\n' >"$WORK/src/layers.txt"
printf '#include "common/a.h"\n' >"$WORK/src/engine/b.cpp"
printf '#pragma once\n' >"$WORK/src/common/a.h"
python3 "$CHECK" "$WORK" >/dev/null || { echo "FAIL: a downward include was rejected"; exit 1; }
printf '#pragma once\n#include "engine/b.h"\n' >"$WORK/src/common/a.h"
if out=$(python3 "$CHECK" "$WORK"); then echo "FAIL: an upward include passed"; exit 1; fi
grep -q "src/common/a.h:2: library 'common' includes \"engine/b.h\"" <<<"$out" ||
  { echo "FAIL: the report does not name the file, line and libraries: $out"; exit 1; }
printf '#pragma once\n' >"$WORK/src/common/a.h"
mkdir -p "$WORK/src/newfolder" && : >"$WORK/src/newfolder/c.cpp"
if python3 "$CHECK" "$WORK" >/dev/null; then echo "FAIL: a folder outside the table passed"; exit 1; fi
echo "layers: ok"
