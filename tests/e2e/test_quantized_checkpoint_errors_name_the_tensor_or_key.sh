#!/usr/bin/env bash
# A quantized checkpoint that is damaged or not supported fails the run with exit status 1 and a
# message naming the tensor or config key: a missing scale tensor, a scale tensor of the wrong
# shape, fp8 weights without a quantization_config, a quant_method tpbatch does not know, and a
# recognised packing it does not run; for 4-bit checkpoints (awq, gptq) a missing zero-point or
# scale tensor, scales of the wrong shape, a group size that does not divide the input width,
# unsupported bits, and an act-order g_idx; for int8 W8A8 ones a missing weight_scale, one of the
# wrong shape, and static (or per-tensor) activation scales.
source "$(dirname "$0")/lib.sh"
"$TPBATCH" make-model "$WORK/base" --preset tiny --layers 2 --quantize fp8-block >/dev/null
int4_shape=(--hidden-size 256 --intermediate-size 384 --layers 2 --heads 8 --kv-heads 4 --head-dim 32 --vocab-size 300)
"$TPBATCH" make-model "$WORK/awq" "${int4_shape[@]}" --quantize awq >/dev/null
"$TPBATCH" make-model "$WORK/gptq" "${int4_shape[@]}" --quantize gptq >/dev/null
"$TPBATCH" make-model "$WORK/int8" --preset tiny --layers 2 --quantize int8 >/dev/null
printf '{"prompt": "Once upon a time"}\n' >"$WORK/in.jsonl"

# case NAME PYTHON-EDIT WORD...: copy the model ($BASE, default base), apply the edit (config.json
# as `c`, the safetensors header as `h`, its data as the bytearray `body`), run, and expect exit 1
# with every WORD in the message.
case_() {
  local name=$1 edit=$2
  shift 2
  cp -r "$WORK/${BASE:-base}" "$WORK/$name"
  $PY - "$WORK/$name" "$edit" <<'PY'
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
body = bytearray(raw[8 + n:])
exec(sys.argv[2])
json.dump(c, open(d + "/config.json", "w"), indent=2)
text = json.dumps(h).encode()
text += b" " * (-len(text) % 8)
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + bytes(body))
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
case_ awq_gemv "c['quantization_config'] = {'quant_method': 'awq', 'bits': 4, 'group_size': 128, 'version': 'gemv'}" \
  quantization_config.version gemv "not supported"

P=model.layers.1.mlp.down_proj
BASE=awq case_ awq_missing_zeros "h['$P.qzeros.orphan'] = h.pop('$P.qzeros')" "$P.qzeros" "is missing" "zero points"
BASE=awq case_ awq_missing_scales "h['$P.scales.orphan'] = h.pop('$P.scales')" "$P.scales" "is missing" "$P.weight"
# [3, 256] read as [256, 3]: the same bytes, the wrong shape.
BASE=awq case_ awq_scale_shape "h['$P.scales']['shape'] = h['$P.scales']['shape'][::-1]" "$P.scales" "[256, 3]" "[3, 256]"
BASE=awq case_ awq_group_does_not_divide "c['quantization_config']['group_size'] = 100" \
  quantization_config.group_size 100 "model.layers.0.mlp.down_proj.qweight"
BASE=awq case_ awq_bits "c['quantization_config']['bits'] = 8" quantization_config.bits 8-bit
BASE=gptq case_ gptq_act_order "c['quantization_config']['desc_act'] = True
a = h['$P.g_idx']['data_offsets'][0]
body[a:a + 4] = struct.pack('<i', 2)" "$P.g_idx" desc_act "act-order"
BASE=gptq case_ gptq_missing_scales "h['$P.scales.orphan'] = h.pop('$P.scales')" "$P.scales" "is missing"
I=model.layers.1.mlp.down_proj.weight_scale
A=quantization_config.config_groups.group_0.input_activations
BASE=int8 case_ int8_missing_scale "h['$I.orphan'] = h.pop('$I')" "$I" "is missing" model.layers.1.mlp.down_proj.weight
BASE=int8 case_ int8_scale_shape "h['$I']['shape'] = [1, h['$I']['shape'][0]]" "$I" "[1, 64]" "[64, 1]"
BASE=int8 case_ int8_static_activations "c$(printf "['%s']" ${A//./ }).update(dynamic=False)" "$A.dynamic" static
BASE=int8 case_ int8_per_tensor_activations "c$(printf "['%s']" ${A//./ }).update(strategy='tensor')" "$A.strategy"
echo PASS
