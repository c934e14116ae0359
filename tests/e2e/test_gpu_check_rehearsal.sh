#!/usr/bin/env bash
# The GPU machine's runtime, rehearsed on the CPU in under a minute: inside
# scripts/simulate_bare_gpu_machine.sh (system MPI, HDF5, yaml-cpp, OpenBLAS, ICU, PCRE2, GTest
# hidden; NCCL only as a pip wheel) the environment of `scripts/gpu_check.sh --env` (the carried
# .debs unpacked into a private prefix) must load every library of tpbatch, run a stories260K job
# with the same tokens and logprobs as outside, and run TP=2 under the prefix's mpirun. Outside the
# namespace nothing may change. (The full rehearsal, which also builds the CUDA configuration, takes
# far longer: see docs/cuda.md "GPU check".)
# Skips (77) without root/unshare/overlayfs or without the .debs (scripts/gpu_fetch_debs.sh
# build-debs).
source "$(dirname "$0")/lib.sh"
need_stories
SRC=${TPBATCH_SOURCE_DIR:?}
DEBS=${GPU_CHECK_DEBS:-$SRC/build-debs}
if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root and unshare for the private mount namespace"
  exit 77
fi
if ! compgen -G "$DEBS/libopenmpi3_*.deb" >/dev/null; then
  echo "SKIP: no .debs in $DEBS (bash scripts/gpu_fetch_debs.sh $DEBS)"
  exit 77
fi
if ! unshare -m --propagation private -- sh -c 'd=$(mktemp -d) && mkdir $d/l $d/u $d/w $d/m &&
  mount -t overlay o -o lowerdir=$d/l,upperdir=$d/u,workdir=$d/w $d/m; r=$?; umount $d/m 2>/dev/null; rm -rf $d; exit $r' 2>/dev/null; then
  echo "SKIP: overlayfs not available here"
  exit 77
fi

printf '{"prompt": "Once upon a time"}\n{"prompt": "The little dog"}\n{"prompt": "Lily and Tom went"}\n' >"$WORK/p.jsonl"
common=("sampling:" "  max_new_tokens: 24" "  temperature: 0.0" "  ignore_eos: true" "device: cpu")
write_job "$WORK/outside.yaml" "$STORIES" "$WORK/p.jsonl" "$WORK/outside.h5" "${common[@]}"
write_job "$WORK/inside.yaml" "$STORIES" "$WORK/p.jsonl" "$WORK/inside.h5" "${common[@]}"
write_job "$WORK/tp2.yaml" "$STORIES" "$WORK/p.jsonl" "$WORK/tp2.h5" "${common[@]}" "parallel:" "  tensor: 2"
timeout 120 "$TPBATCH" "$WORK/outside.yaml" >"$WORK/outside.log" 2>&1 || fail "outside run: $(tail -3 "$WORK/outside.log")"

cat >"$WORK/inside.sh" <<'EOF'
set -euo pipefail
[[ ! -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h && ! -e /usr/include/hdf5/serial/hdf5.h ]] ||
  { echo "system MPI/HDF5 still visible"; exit 1; }
[[ "$(ldd "$TPBATCH")" == *"not found"* ]] || { echo "tpbatch loads without the prefix: nothing hidden?"; exit 1; }
eval "$(GPU_CHECK_DEBS=$DEBS GPU_CHECK_PREFIX=$WORK/prefix GPU_CHECK_WORK=$WORK/gc bash "$SRC/scripts/gpu_check.sh" --env)"
missing=$(ldd "$TPBATCH" "$(command -v mpirun)" "$(command -v orted)" | grep "not found" || true)
[[ -z "$missing" ]] || { echo "missing under the prefix: $missing"; exit 1; }
[[ "$(command -v mpirun)" == "$WORK/prefix/"* ]] || { echo "mpirun is not the prefix's: $(command -v mpirun)"; exit 1; }
[[ "$LD_LIBRARY_PATH" == *nvidia/nccl/lib* ]] || { echo "the pip-wheel NCCL is not on LD_LIBRARY_PATH"; exit 1; }
timeout 120 "$TPBATCH" "$WORK/inside.yaml" >"$WORK/inside.log" 2>&1 || { tail -5 "$WORK/inside.log"; exit 1; }
timeout 120 mpirun -np 2 --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x OPAL_PREFIX -x PATH \
  "$TPBATCH" "$WORK/tp2.yaml" >"$WORK/tp2.log" 2>&1 || { tail -5 "$WORK/tp2.log"; exit 1; }
# The comparison inside too: h5py of the system Python loads the prefix's libhdf5.
"$PY" "$SRC/scripts/gpu_check_tools.py" compare "$WORK/inside.h5" "$WORK/outside.h5" --tol 1e-6 >"$WORK/cmp-inside.txt"
"$PY" "$SRC/scripts/gpu_check_tools.py" compare "$WORK/tp2.h5" "$WORK/outside.h5" --tol 1e-4 >"$WORK/cmp-tp2.txt"
EOF
export TPBATCH SRC DEBS WORK PY
visible() {
  for f in /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/include/hdf5/serial/hdf5.h /usr/local/cuda/include/nccl.h; do
    [[ -e "$f" ]] && printf '%s ' "$f"
  done
  python3 -c 'import site, os; print(os.path.exists(os.path.join(site.getsitepackages()[0], "nvidia", "nccl")))'
}
before=$(visible)
timeout 300 bash "$SRC/scripts/simulate_bare_gpu_machine.sh" bash "$WORK/inside.sh" >"$WORK/sim.log" 2>&1 ||
  fail "inside the simulated bare GPU machine: $(tail -8 "$WORK/sim.log")"

# verdict rows_same rows near_ties tokens_common tokens max_dlogprob first_diff (no near ties allowed)
read -r v rs rn _ <"$WORK/cmp-inside.txt"
[[ "$v" == pass && "$rs" == 3 && "$rn" == 3 ]] || fail "inside vs outside: $(cat "$WORK/cmp-inside.txt")"
read -r v rs rn _ <"$WORK/cmp-tp2.txt"
[[ "$v" == pass && "$rs" == 3 ]] || fail "TP=2 inside vs TP=1 outside: $(cat "$WORK/cmp-tp2.txt")"
# Nothing outside the namespace changed.
[[ "$(visible)" == "$before" ]] || fail "outside the namespace, visible files changed: before '$before', after '$(visible)'"
echo "PASS: tpbatch runs on the carried .debs alone (same tokens, TP=2 via the prefix's mpirun); $(head -1 "$WORK/sim.log")"
