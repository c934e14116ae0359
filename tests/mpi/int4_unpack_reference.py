"""Independent reading of make-model's 4-bit files, straight from the public formats, for
test_int4_checkpoints_match_their_dequantized_twin.sh: unpacks every quantized projection with
numpy as AutoAWQ (dequantize_gemm: unpack, reverse the 0,2,4,6,1,3,5,7 order), AutoGPTQ
(qzeros + 1, g_idx) and compressed-tensors (unpack_from_int32, minus 8) dequantize them, and
checks the dequantized twin's float32 tensors are those values to the last bit.
usage: int4_unpack_reference.py SCHEME QUANTIZED_DIR TWIN_DIR"""
import json, struct, sys
import numpy as np

scheme, qdir, tdir = sys.argv[1:4]


def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    kinds = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "BF16": np.uint16}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        v = np.frombuffer(body[a:b], dtype=kinds[t["dtype"]]).reshape(t["shape"])
        if t["dtype"] == "BF16":
            v = (v.astype(np.uint32) << 16).view(np.float32)
        out[name] = v
    return out


def nibbles(words, axis):
    """int32 words -> 8 4-bit codes each, the word's low nibble first, along `axis`."""
    w = words.astype(np.int64) & 0xFFFFFFFF
    parts = [(w >> (4 * i)) & 0xF for i in range(8)]
    return np.stack(parts, axis=axis + 1).reshape(*w.shape[:axis], w.shape[axis] * 8, *w.shape[axis + 1:])


q = tensors(qdir + "/model.safetensors")
twin = tensors(tdir + "/model.safetensors")
config = json.load(open(qdir + "/config.json"))["quantization_config"]
checked = 0
for name, ref in twin.items():
    stem = name[: -len("weight")]
    if scheme in ("awq", "gptq") and stem + "qweight" in q:
        g = config["group_size"]
        scales = q[stem + "scales"].astype(np.float32)  # [K/g, N]
        if scheme == "awq":
            reverse = [0, 4, 1, 5, 2, 6, 3, 7]
            iw = nibbles(q[stem + "qweight"], 1)  # [K, N] in AWQ order
            iz = nibbles(q[stem + "qzeros"], 1)
            n = iw.shape[1]
            order = (np.arange(n) // 8) * 8
            idx = np.array([o + reverse[c % 8] for c, o in zip(range(n), order)])
            iw, iz = iw[:, idx], iz[:, idx]
            gidx = np.arange(iw.shape[0]) // g
        else:
            iw = nibbles(q[stem + "qweight"], 0)  # [K, N]
            iz = nibbles(q[stem + "qzeros"], 1) + 1
            gidx = q[stem + "g_idx"]
        w = (iw.astype(np.float32) - iz[gidx].astype(np.float32)) * scales[gidx]
        got = w.T
    elif scheme == "w4a16" and stem + "weight_packed" in q:
        n_out, k_in = q[stem + "weight_shape"]
        iw = nibbles(q[stem + "weight_packed"], 1)[:, :k_in].astype(np.float32) - 8  # [N, K]
        s = q[stem + "weight_scale"]  # [N, K/g]
        g = k_in // s.shape[1]
        got = iw * np.repeat(s, g, axis=1)
    else:
        continue
    if got.shape != ref.shape or not np.array_equal(got.astype(np.float32), ref):
        diff = np.abs(got - ref).max() if got.shape == ref.shape else "shape %s vs %s" % (got.shape, ref.shape)
        sys.exit("%s: %s dequantized by the reference differs from the twin: %s" % (scheme, name, diff))
    checked += 1
if checked == 0:
    sys.exit("%s: no quantized tensor found" % scheme)
print("%s: %d quantized tensors dequantize to the twin's values exactly" % (scheme, checked))
