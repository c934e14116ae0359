#!/usr/bin/env bash
# The emulated NCCL between two processes: right programs complete, wrong ones are stopped with
# the diagnosis the emulator promises (cuemu/README.md), never left to hang.
#   nccl_planted_bugs.sh PROBE
set -uo pipefail
PROBE=${1:?usage: $0 nccl_probe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export CUEMU_DEVICES=2 CUEMU_NCCL_TIMEOUT_S=5
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuemu-nccl.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fails=0
probe() {  # probe CASE MODE: runs the case, output in $WORK/CASE.log, returns its exit status
  CUEMU_MODE=$2 timeout -k 5 60 mpirun -np 2 --bind-to none -x CUEMU_DEVICES -x CUEMU_NCCL_TIMEOUT_S -x CUEMU_MODE \
    "$PROBE" "$1" >"$WORK/$1.log" 2>&1
}
completes() {
  if probe "$1" "$2"; then echo "ok: $1 ($2 streams) completes"
  else echo "FAIL: $1 ($2 streams) did not complete:"; tail -5 "$WORK/$1.log"; fails=$((fails + 1)); fi
}
diagnosed() {  # diagnosed CASE MODE PATTERN
  local rc=0
  probe "$1" "$2" || rc=$?
  if ((rc == 124 || rc == 137)); then
    echo "FAIL: $1 hung (the emulator should have stopped it)"; fails=$((fails + 1))
  elif ((rc == 0)); then
    echo "FAIL: $1 completed: the bug went unnoticed"; fails=$((fails + 1))
  elif grep -q -E "$3" "$WORK/$1.log"; then
    echo "ok: $1 diagnosed: $(grep -m1 -o -E "$3.{0,80}" "$WORK/$1.log")"
  else
    echo "FAIL: $1 stopped (exit $rc) without the diagnosis /$3/:"; tail -5 "$WORK/$1.log"; fails=$((fails + 1))
  fi
}
completes allreduce lazy
completes allreduce threaded
completes mpi_waits_on_nccl threaded
diagnosed counts_differ threaded "collective #1 differs between ranks"
diagnosed both_send_first threaded "in ncclSend \(waiting for the peer's recv\): a deadlock"
exit $((fails > 0))
