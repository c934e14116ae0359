# Shared by the end-to-end tests: locating the binary, the shared assets, mpirun as root.
# Tests exit 77 (ctest: skipped) when an asset they need is absent.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
: "${TPBATCH:?TPBATCH must point at the tpbatch binary}"
: "${TPBATCH_BUILD_DIR:?}"
SHARED=${TPBATCH_SHARED_DIR:-}
REFERENCE="$TPBATCH_BUILD_DIR/tests/reference/tpbatch_reference"
PY=/usr/bin/python3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpbatch-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STORIES="$SHARED/models/stories260K"

need_stories() {
  if [ ! -f "$STORIES/model.safetensors" ]; then
    echo "SKIP: $STORIES not present (shared test model absent)"
    exit 77
  fi
}

# mpirun_tpbatch NP ARGS...: run tpbatch on NP ranks, bounded in time.
mpirun_tpbatch() {
  local np=$1
  shift
  timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$TPBATCH" "$@"
}

# write_job FILE MODEL INPUT OUTPUT [extra YAML lines...]
write_job() {
  local file=$1 model=$2 input=$3 output=$4
  shift 4
  {
    echo "model: $model"
    echo "input:"
    echo "  path: $input"
    echo "output:"
    echo "  path: $output"
    echo "  if_exists: overwrite"
    for line in "$@"; do echo "$line"; done
  } >"$file"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
