#!/usr/bin/env bash
# docs/job-keys.md is exactly what `tpbatch job-keys` writes from the key table, so the reference
# never drifts from the keys the job file accepts (and every key has a description).
source "$(dirname "$0")/lib.sh"
PAGE="$HERE/../../docs/job-keys.md"
"$TPBATCH" job-keys >"$WORK/job-keys.md" || fail "tpbatch job-keys failed"
diff -u "$PAGE" "$WORK/job-keys.md" ||
  fail "docs/job-keys.md differs from the key table; regenerate it: build/tpbatch job-keys > docs/job-keys.md"
echo "docs/job-keys.md matches the key table ($(grep -c '^| `' "$PAGE") keys)"
