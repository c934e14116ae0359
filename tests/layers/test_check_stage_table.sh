#!/usr/bin/env bash
# The layers.stage_table test: the stage table of docs/how-it-works.md names every folder of
# src/layers.txt and no folder that does not exist; and the check itself catches both.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK="$ROOT/scripts/check_stage_table.py"
python3 "$CHECK" "$ROOT"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src/common" "$WORK/src/engine" "$WORK/docs"
printf 'common src/common -\nengine src/engine common\n' >"$WORK/src/layers.txt"
table() { printf '# How it works\n\n## Stages\n\n| folder | stage |\n| --- | --- |\n'; for f in "$@"; do printf '| `%s/` | a stage |\n' "$f"; done; printf '\n## Next\n\n| `src/other/` | not the table |\n'; }
table src/common src/engine >"$WORK/docs/how-it-works.md"
python3 "$CHECK" "$WORK" >/dev/null || { echo "FAIL: a table matching the layers was rejected"; exit 1; }
table src/common >"$WORK/docs/how-it-works.md"
out=$(python3 "$CHECK" "$WORK") && { echo "FAIL: a table missing src/engine/ passed"; exit 1; }
grep -q "builds 'src/engine/', which the stage table does not name" <<<"$out" || { echo "FAIL: the missing folder is not named: $out"; exit 1; }
table src/common src/engine src/gone >"$WORK/docs/how-it-works.md"
out=$(python3 "$CHECK" "$WORK") && { echo "FAIL: a table naming a folder that does not exist passed"; exit 1; }
grep -q "docs/how-it-works.md:9: the stage table names 'src/gone/', which does not exist" <<<"$out" ||
  { echo "FAIL: the stale row is not named with its line: $out"; exit 1; }
echo "stage table: ok"
