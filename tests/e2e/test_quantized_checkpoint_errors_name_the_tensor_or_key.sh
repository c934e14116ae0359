#!/usr/bin/env bash
# A quantized checkpoint that is damaged or not supported fails the run with exit status 1 and a
# message naming the tensor or config key: a missing scale tensor, a scale tensor of the wrong
# shape, fp8 weights without a quantization_config, a quant_method tpbatch does not know, and a
# recognised one it does not run yet.
source "$(dirname "$0")/lib.sh"
"$TPBATCH" make-model "$WORK/base" --preset tiny --layers 2 --quantize fp8-block >/dev/null
printf '{"prompt": "Once upon a time"}\n' >"$WORK/in.jsonl"

# case NAME PYTHON-EDIT WORD...: copy the model, apply the edit (config.json as `c`, the
# safetensors header as `h`), run, and expect exit 1 with every WORD in the message.
case_() {
  local name=$1 edit=$2
  shift 2
  cp -r "$WORK/base" "$WORK/$name"
  $PY - "$WORK/$name" "$edit" <<'PY'
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
exec(sys.argv[2])
json.dump(c, open(d + "/config.json", "w"), indent=2)
text = json.dumps(h).encode()
text += b" " * (-len(text) % 8)
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
  write_job "$WORK/$name.yaml" "$WORK/$name" "$WORK/in.jsonl" "$WORK/$name.h5" "sampling:" "  max_new_tokens: 4"
  local rc=0
  mpirun_tpbatch 1 "$WORK/$name.yaml" >"$WORK/$name.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$WORK/$name.log"; fail "$name: exit status $rc, want 1"; }
  for word in "$@"; do
    grep -qF -- "$word" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: the message does not name '$word'"; }
  done
  echo "$name: exit 1: $(grep -F -- "$1" "$WORK/$name.log" | head -1)"
}

S=model.layers.1.mlp.down_proj.weight_scale_inv
# The scale tensor renamed away (its bytes stay, under a name nothing reads).
case_ missing_scale "h['$S.orphan'] = h.pop('$S')" "$S" "is missing" model.layers.1.mlp.down_proj.weight
# [1, 2] read as [2, 1]: the same bytes, the wrong shape.
case_ scale_shape "h['$S']['shape'] = h['$S']['shape'][::-1]" "$S" "[2, 1]" "[1, 2]"
case_ no_quantization_config "del c['quantization_config']" F8_E4M3 quantization_config
case_ unknown_method "c['quantization_config']['quant_method'] = 'hqq'" quantization_config.quant_method hqq
case_ awq "c['quantization_config'] = {'quant_method': 'awq', 'bits': 4, 'group_size': 128, 'version': 'gemm'}" \
  quantization_config.quant_method awq "not supported yet"
echo PASS
