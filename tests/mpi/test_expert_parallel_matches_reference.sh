#!/usr/bin/env bash
# parallel.experts: expert: each tensor-parallel rank holds whole experts (a
# block of num_experts / tensor) and runs only the tokens routed to them; the one allreduce per MoE
# layer sums the ranks' outputs. At TP=2 on generated Mixtral and Qwen3-MoE models (4 experts,
# top-2: every token's two choices fall on one rank or on both), greedy tokens equal the numpy
# reference's and logprobs are within 1e-3, as under the default tensor split
# (test_mixture_of_experts_match_reference.sh). Bad input: expert on a dense model, and experts not
# divisible by parallel.tensor, are job errors (exit 2) naming the key (and `plan` refuses the first).
source "$(dirname "$0")/../e2e/lib.sh"
need_numpy_h5py

generated_model mixtral --architecture MixtralForCausalLM --layers 3 --heads 4 --kv-heads 2 --intermediate-size 64 \
  --experts 4 --experts-per-token 2 --tie-word-embeddings 0 --seed 41
generated_model qwen3moe --architecture Qwen3MoeForCausalLM --layers 3 --head-dim 32 --intermediate-size 64 \
  --experts 4 --experts-per-token 2 --moe-intermediate-size 48 --norm-topk-prob 0 --mlp-only-layers 1 --seed 42

write_reference_job
for family in mixtral qwen3moe; do
  matches_reference "$family" 2 1 --set parallel.experts=expert
done
$PY - "$WORK/out.h5" <<'PY' || fail "the results file's job_yaml does not say parallel.experts: expert"
import h5py, sys
v = h5py.File(sys.argv[1], "r").attrs["job_yaml"]
v = v.decode() if isinstance(v, bytes) else str(v)
assert "  experts: expert\n" in v, v
PY

# expect_job_error WHAT NP ARGS...: tpbatch exits 2 and its message names parallel.experts.
expect_job_error() {
  local what=$1 np=$2 rc=0
  shift 2
  mpirun_tpbatch "$np" "$WORK/job.yaml" "$@" 2>"$WORK/log" || rc=$?
  [ "$rc" = 2 ] || { cat "$WORK/log"; fail "$what: exit $rc, wanted 2"; }
  grep -q "parallel.experts" "$WORK/log" || { cat "$WORK/log"; fail "$what: the error does not name parallel.experts"; }
  echo "$what: exit 2, $(grep -m1 -o 'parallel.experts: .*' "$WORK/log" | cut -c1-110)"
}
generated_model llama --seed 43
expect_job_error "expert on a dense model" 1 --set model="$WORK/llama" --set parallel.experts=expert
rc=0
"$TPBATCH" plan "$WORK/job.yaml" --set model="$WORK/llama" --set parallel.experts=expert >"$WORK/plan" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "parallel.experts" "$WORK/plan" || { cat "$WORK/plan"; fail "plan of expert on a dense model: exit $rc"; }
generated_model three --architecture MixtralForCausalLM --layers 1 --experts 3 --experts-per-token 2 --seed 44
expect_job_error "3 experts at TP=2" 2 --set model="$WORK/three" --set parallel.tensor=2 --set parallel.experts=expert
echo "parallel.experts: expert matches the numpy reference at TP=2 (Mixtral, Qwen3-MoE); bad layouts are refused naming the key"
