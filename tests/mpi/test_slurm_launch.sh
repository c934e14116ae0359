#!/usr/bin/env bash
# A real single-node Slurm (munge + slurmctld + slurmd as root, all state under $WORK) runs
# stories260K greedy jobs through the templates in slurm/ and through a bare srun:
#   (0) a template whose shared launcher (slurm/launch.sh) is not found fails with exit 2, naming it
#   (a) sbatch slurm/cpu_partition.sbatch, LAUNCH=mpirun  (2 ranks; every rank sees SLURM_PROCID=0),
#       submitted from the checkout (the launcher found from SLURM_SUBMIT_DIR)
#   (b) srun --mpi=pmix --overcommit -n 2 tpbatch          (TP=2, no batch script)
#   (c) sbatch slurm/one_node_tp4x2.sbatch, LAUNCH=mpirun (8 ranks, TP=4 x 2 replicas, on CPU)
#   (d) sbatch slurm/cpu_partition.sbatch, LAUNCH=srun (srun --mpi=pmix inside), stopped by TERM as
#       at the time limit: it requeues itself and the second run resumes the file
#   (e) sbatch --array=1-3 slurm/array_tp4x2.sbatch (3 shards, array ids from 1, 2 ranks each), then
#       slurm/merge_shards.sbatch dependent on the array (afterok): the merged file is the job's
# (c), (d) and (e) are submitted from elsewhere and find the launcher through TPBATCH_HOME.
# Each results file must match the independent reference token for token and carry the
# world_size the launcher gave it (so rank identity came from MPI, not from SLURM_PROCID).
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
for b in munged slurmctld slurmd sbatch srun scontrol sinfo; do
  command -v "$b" >/dev/null || { echo "SKIP: $b not installed (scripts/setup.sh installs Slurm)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: a private slurmd must run as root"; exit 77; }
E2E="$HERE/../e2e"
SLURM_DIR=$(cd "$HERE/../../slurm" && pwd)
REPO=$(dirname "$SLURM_DIR")
# A CI job may itself run under Slurm: none of that may leak into the private cluster.
for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|PMIX_|PMI_)' || true); do unset "$v"; done
unset TPBATCH_HOME   # (a) finds the launcher from SLURM_SUBMIT_DIR; (c), (d) set it

pids=()
cleanup() {
  set +e
  if [ -f "$WORK/slurm.conf" ] && ((${#pids[@]})); then
    scancel --full --quiet --user=root 2>/dev/null   # only our private controller (SLURM_CONF)
    sleep 1
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.3; done
    kill -KILL "$p" 2>/dev/null
  done
  # Left-over job steps (slurmstepd, ranks) are recognisable by their working folder.
  for d in /proc/[0-9]*; do
    case $(readlink "$d/cwd" 2>/dev/null) in "$WORK"|"$WORK"/*) kill -KILL "${d#/proc/}" 2>/dev/null ;; esac
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

show_logs() {
  scontrol show job 2>/dev/null
  sinfo -N -l 2>/dev/null
  for f in "$WORK"/log/* "$WORK"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done
}
die() { show_logs >&2; fail "$@"; }

# --- munge: own key and socket ------------------------------------------------------------
mkdir -p "$WORK/munge" "$WORK/state" "$WORK/spool" "$WORK/log"
chmod 755 "$WORK" "$WORK/munge"
head -c 1024 /dev/urandom >"$WORK/munge/munge.key"
chmod 400 "$WORK/munge/munge.key"
SOCK="$WORK/munge/munge.socket"
munged --foreground --force --key-file="$WORK/munge/munge.key" --socket="$SOCK" \
  --pid-file="$WORK/munge/munged.pid" --log-file="$WORK/log/munged.log" \
  --seed-file="$WORK/munge/munged.seed" >"$WORK/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null || die "munge does not work"

# --- slurm.conf -----------------------------------------------------------------------------
NODE=$(hostname -s)
read -r CTLD_PORT SLURMD_PORT < <($PY -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
# At least 8 CPUs (the 8-rank template), whatever the machine has: config_overrides makes slurmd
# take the node line as written instead of draining the node for a mismatch.
CPUS=$(nproc)
((CPUS >= 8)) || CPUS=8
export SLURM_CONF="$WORK/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=tpbatchci
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job may start again after 5 s (default 120)
AuthInfo=socket=$SOCK,cred_expire=5
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$NODE" -f "$SLURM_CONF" >"$WORK/log/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 60); do
  state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || die "node $NODE not idle after 30 s (state '$state')"
srun --mpi=list 2>&1 | grep -q pmix || die "srun has no pmix plugin: $(srun --mpi=list 2>&1)"

write_job "$WORK/job.yaml" "$STORIES" "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true"

# job_field ID FIELD: one field of `scontrol show job` (sacct would need slurmdbd).
job_field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# wait_job ID: until the job is COMPLETED (ok) or ends otherwise (fail), at most 280 s (a loaded
# CI machine runs other MPI tests beside this one).
wait_job() {
  local s=
  for _ in $(seq 560); do
    s=$(job_field "$1" JobState)
    case $s in
      COMPLETED) return 0 ;;
      FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        die "job $1 ended $s (exit $(job_field "$1" ExitCode))" ;;
    esac
    sleep 0.5
  done
  die "job $1 still $s after 280 s"
}

# check H5 WORLD TENSOR
check() {
  $PY -c "import h5py,sys; a=h5py.File('$1').attrs; sys.exit(0 if (a['world_size'],a['tensor_parallel'])==($2,$3) else 'layout attrs %s, want world %d tensor %d' % ((a['world_size'],a['tensor_parallel']),$2,$3))" ||
    die "$1: wrong layout"
  $PY "$E2E/check_against_reference.py" "$1" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9 ||
    die "$1 differs from the reference"
}

# The node claims 8 CPUs, so Open MPI does not know its ranks share 2 cores: without this they
# busy-poll each other and a TP=4 step takes seconds instead of milliseconds.
export OMPI_MCA_mpi_yield_when_idle=1
# CPU-sized overrides for the templates (2 cores here; --overcommit lets 8 ranks share them).
SMALL=(-p debug -t 10 --cpus-per-task=1 --overcommit -D "$WORK")

echo "== [${SECONDS}s] (0) the launcher not found: exit 2 naming where it looked"
# sbatch runs a spooled copy of the template: it must not fall back to a launcher next to $0.
id=$(TPBATCH_HOME="$WORK/nowhere" sbatch --parsable "${SMALL[@]}" --ntasks-per-node=1 -o "$WORK/0.log" \
  "$SLURM_DIR/cpu_partition.sbatch" "$WORK/job.yaml")
s=
for _ in $(seq 560); do
  s=$(job_field "$id" JobState)
  case $s in PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.5 ;; *) break ;; esac
done
[ "$s" = FAILED ] && [ "$(job_field "$id" ExitCode)" = 2:0 ] ||
  die "job $id without a launcher ended $s (exit $(job_field "$id" ExitCode)), want FAILED 2:0"
want="cpu_partition.sbatch: no $WORK/nowhere/slurm/launch.sh (submit from the tpbatch checkout, or set TPBATCH_HOME to it)"
grep -qxF "$want" "$WORK/0.log" || die "job $id log lacks '$want': $(cat "$WORK/0.log")"
grep -q '^tpbatch: ' "$WORK/0.log" && die "job $id started tpbatch without a launcher"

echo "== [${SECONDS}s] (a) sbatch slurm/cpu_partition.sbatch, LAUNCH=mpirun, 2 ranks, from the checkout"
id=$(cd "$REPO" && LAUNCH=mpirun sbatch --parsable "${SMALL[@]}" --ntasks-per-node=2 -o "$WORK/a.log" \
  "$SLURM_DIR/cpu_partition.sbatch" "$WORK/job.yaml" --set output.path="$WORK/a.h5")
wait_job "$id"
check "$WORK/a.h5" 2 1

echo "== [${SECONDS}s] (b) srun --mpi=pmix --overcommit -n 2, TP=2"
timeout 120 srun --mpi=pmix --overcommit -n 2 -t 10 -D "$WORK" "$TPBATCH" "$WORK/job.yaml" \
  --set parallel.tensor=2 --set output.path="$WORK/b.h5" >"$WORK/b.log" 2>&1 || die "srun failed: $(cat "$WORK/b.log")"
check "$WORK/b.h5" 2 2

echo "== [${SECONDS}s] (c) sbatch slurm/one_node_tp4x2.sbatch, LAUNCH=mpirun, 8 ranks TP=4 x 2"
id=$(TPBATCH_HOME="$REPO" LAUNCH=mpirun sbatch --parsable "${SMALL[@]}" --gpus-per-node=0 -o "$WORK/c.log" \
  "$SLURM_DIR/one_node_tp4x2.sbatch" "$WORK/job.yaml" --set output.path="$WORK/c.h5")
wait_job "$id"
check "$WORK/c.h5" 8 4

echo "== [${SECONDS}s] (d) sbatch slurm/cpu_partition.sbatch, LAUNCH=srun, TERM as at the time limit: requeue, resume"
# 100 copies of the 9 prompts (seconds of work): row i must equal row i % 9 of a.h5 (checked above).
$PY -c "
import json
rows = [json.loads(l) for l in open('$E2E/prompts_mixed.jsonl')]
with open('$WORK/big.jsonl', 'w') as f:
    for k in range(100):
        for r in rows: f.write(json.dumps(dict(r, id='%s-%d' % (r['id'], k))) + '\n')"
id=$(TPBATCH_HOME="$REPO" LAUNCH=srun sbatch --parsable "${SMALL[@]}" --ntasks-per-node=2 -o "$WORK/d.log" \
  "$SLURM_DIR/cpu_partition.sbatch" "$WORK/job.yaml" --set input.path="$WORK/big.jsonl" \
  --set output.path="$WORK/d.h5" --set engine.progress_interval=0.5)
# TERM once rows are done and flushed (the writer flushes every 5 s), or half the rows are done.
ready=
for _ in $(seq 1000); do
  ready=$(sed -n 's/.*rows \([0-9]*\)\/900 .*elapsed \([0-9]*\)s.*/\1 \2/p' "$WORK/d.log" 2>/dev/null |
    awk '$1 > 0 && ($2 >= 6 || $1 >= 450) { print; exit }' || true)
  [ -n "$ready" ] && break
  sleep 0.25
done
[ -n "$ready" ] || die "job $id: no progress in 250 s (state $(job_field "$id" JobState), reason $(job_field "$id" Reason))"
echo "rows done, elapsed s at TERM: $ready"
scancel --signal=TERM --batch "$id" # what --signal=B:TERM@120 sends near the time limit
wait_job "$id"
[ "$(job_field "$id" Restarts)" = 1 ] || die "job $id restarted $(job_field "$id" Restarts) times, want 1"
[ "$(grep -c '^tpbatch: srun' "$WORK/d.log")" = 2 ] || die "expected two runs in $WORK/d.log"
$PY - "$WORK/d.h5" "$WORK/a.h5" <<'PYEOF' || die "the requeued job's results are wrong"
import sys, h5py, numpy as np
d, a = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert d.attrs["complete"] == 1 and d.attrs["num_rows"] == 900, "resumed file incomplete"
assert np.all(d["done"][:] == 1), "rows not done"
for i in range(900):
    if list(d["output_tokens"][i]) != list(a["output_tokens"][i % 9]):
        sys.exit("row %d differs from the reference tokens" % i)
print("900/900 rows of the requeued job match the reference")
PYEOF
grep '\[tpbatch\] done:' "$WORK/d.log" | sed 's/^/  the requeued run: /'

echo "== [${SECONDS}s] (e) sbatch --array=1-3 slurm/array_tp4x2.sbatch, then slurm/merge_shards.sbatch afterok"
array=$(TPBATCH_HOME="$REPO" LAUNCH=mpirun sbatch --parsable "${SMALL[@]}" --gpus-per-node=0 --array=1-3 \
  --ntasks-per-node=2 -o "$WORK/e-%a.log" "$SLURM_DIR/array_tp4x2.sbatch" "$WORK/job.yaml" \
  --set parallel.tensor=1 --set output.path="$WORK/e.h5")
id=$(sbatch --parsable -p debug -t 10 -D "$WORK" --dependency=afterok:"$array" -o "$WORK/e-merge.log" \
  "$SLURM_DIR/merge_shards.sbatch" "$WORK/e.h5" "$WORK/e.shard-*-of-0003.h5")
wait_job "$id"
for i in 1 2 3; do
  grep -q "shard $((i - 1)) of 3 (input lines" "$WORK/e-$i.log" || die "array task $i ran no shard: $(cat "$WORK/e-$i.log")"
done
grep -q "merged 3 shards, 9 rows" "$WORK/e-merge.log" || die "the merge job: $(cat "$WORK/e-merge.log")"
check "$WORK/e.h5" 2 1
echo "== [${SECONDS}s] all Slurm launches match the reference"
