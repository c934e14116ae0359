#!/usr/bin/env bash
# A true 2-node Open MPI job on one machine: a hostfile with 127.0.0.2 and 127.0.0.3 (4 slots
# each), an rsh agent that runs the remote command locally, and no shared-memory BTL (both
# "nodes" share /dev/shm); ranks yield when idle (8 ranks on 2 cores). MPI_COMM_TYPE_SHARED then
# sees 2 nodes of 4 ranks: TP=4 inside each node, PP=2 across them, and the results match the reference.
#
# Real nodes have a /tmp each; these two share one. Open MPI 4.1 names its session directory after
# the host name (the same here), so without care mpirun and both fake nodes' daemons write the same
# files in it: the hwloc topology each daemon exports in shared memory (`hwloc.sm`, written by
# hwloc_shmem_topology_write — the segfault seen under load) and PMIx's shared-memory store. So each
# fake node gets a session directory of its own (TMPDIR per host, set by the rsh agent), the shared
# hwloc topology is off (rtc_hwloc_vmhole none) and PMIx keeps its store in a hash (gds=hash).
source "$(dirname "$0")/../e2e/lib.sh"
need_stories
E2E="$HERE/../e2e"
cat >"$WORK/hosts" <<HOSTS
127.0.0.2 slots=4
127.0.0.3 slots=4
HOSTS
mkdir -p "$WORK/tmp-launcher" "$WORK/tmp-127.0.0.2" "$WORK/tmp-127.0.0.3"
cat >"$WORK/rsh" <<AGENT
#!/bin/sh
# Called as: rsh [options] HOST COMMAND...; run COMMAND here, with that host's own TMPDIR.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1
shift
TMPDIR="$WORK/tmp-\$host"
export TMPDIR
exec /bin/sh -c "\$*"
AGENT
chmod +x "$WORK/rsh"
write_job "$WORK/job.yaml" "$STORIES" "$E2E/prompts_mixed.jsonl" "$WORK/out.h5" \
  "sampling:" "  max_new_tokens: 64" "  ignore_eos: true" "parallel:" "  tensor: 4" "  pipeline: 2"
export PMIX_MCA_gds=hash OMPI_MCA_rtc_hwloc_vmhole=none
status=0
TMPDIR="$WORK/tmp-launcher" timeout 300 mpirun -np 8 --hostfile "$WORK/hosts" --mca plm_rsh_agent "$WORK/rsh" \
  --mca btl '^vader' --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1 \
  --bind-to none -x PMIX_MCA_gds "$TPBATCH" "$WORK/job.yaml" 2>"$WORK/log" || status=$?
if [ "$status" -ne 0 ]; then
  cat "$WORK/log"
  ls -R "$WORK"/tmp-* 2>/dev/null | head -40
  fail "2-node run failed (exit $status)"
fi
grep -q "on 2 node(s)" "$WORK/log" || fail "MPI did not see 2 nodes: $(head -3 "$WORK/log")"
# Each fake node really had a session directory of its own (the isolation above took effect).
$PY "$E2E/check_against_reference.py" "$WORK/out.h5" --reference "$REFERENCE" --model "$STORIES" --expect-rows 9
