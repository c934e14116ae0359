# The body shared by the slurm/*.sbatch templates: starts tpbatch under srun or mpirun and, near the
# time limit, stops it and requeues the job. Not submitted itself: a template keeps its own #SBATCH
# lines, sets the variables below and sources this file with the job's arguments:
#
#   TEMPLATE=one_node_tp4x2.sbatch                          # its name, for the usage message
#   LAYOUT=(--set parallel.tensor=4 --set parallel.pipeline=1)  # its --set arguments
#   source "$launcher" "$@"                                 # JOB.yaml [--set KEY=VALUE ...]
#
# tpbatch gets JOB.yaml, then LAYOUT, then --set output.if_exists=resume (a requeued run continues
# the same file), then the rest of the user's arguments, so a later --set overrides the template's.
#
# sbatch runs a spooled copy of the template, so the template cannot find this file next to $0: it
# looks in ${TPBATCH_HOME:-$SLURM_SUBMIT_DIR}/slurm/ (see slurm/README.md).
#
# Environment (sbatch exports the submitter's to the job):
#   LAUNCH=srun|mpirun  srun (default): srun --mpi=pmix --kill-on-bad-exit=1 tpbatch ...;
#                       mpirun: mpirun --bind-to none tpbatch ... (no -np: one rank per Slurm task)
#   TPBATCH             the binary (default: tpbatch on PATH)
#   MAX_RESTARTS        the most self-requeues (default 20)
set -euo pipefail
: "${TEMPLATE:?slurm/launch.sh: the template must set TEMPLATE}"
[ "$(declare -p LAYOUT 2>/dev/null)" ] || { echo "slurm/launch.sh: $TEMPLATE must set LAYOUT" >&2; exit 2; }
JOB=${1:?usage: sbatch $TEMPLATE JOB.yaml [--set KEY=VALUE ...]}; shift
# Layout first, so "$@" can override it; resume makes a requeued run continue the same file.
ARGS=("${LAYOUT[@]}" --set output.if_exists=resume "$@")
export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-1}   # srun no longer inherits it (Slurm >= 22.05)
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
case ${LAUNCH:-srun} in
  srun)   cmd=(srun --mpi=pmix --kill-on-bad-exit=1 "${TPBATCH:-tpbatch}" "$JOB" "${ARGS[@]}") ;;
  mpirun) cmd=(mpirun --bind-to none "${TPBATCH:-tpbatch}" "$JOB" "${ARGS[@]}") ;;  # -np: all Slurm tasks
  *) echo "LAUNCH must be srun or mpirun, not '$LAUNCH'" >&2; exit 2 ;;
esac
# Near the time limit (or on `scancel --signal=TERM --batch`): stop the ranks, then requeue;
# the next run resumes from the rows already done.
on_term() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  if ((${SLURM_RESTART_COUNT:-0} < ${MAX_RESTARTS:-20})); then scontrol requeue "$SLURM_JOB_ID"; fi
  exit 143
}
trap on_term TERM
echo "tpbatch: ${cmd[*]} (restart ${SLURM_RESTART_COUNT:-0})"
"${cmd[@]}" &
pid=$!
wait "$pid"
