"""Makes a generated model (tpbatch make-model) a reasoning model for the tests: its tokenizer gets
<think> and </think> as added tokens (ids 510 and 511, whose BPE pieces are dropped, as Qwen3's and
DeepSeek-R1's tokenizers have them: single, not special tokens), and its tokenizer_config.json
the chat template given (a real Qwen3 template).

usage: reasoning_model.py MODEL_DIR TEMPLATE.jinja
"""
import json
import sys

THINK = {510: "<think>", 511: "</think>"}


def main():
    model_dir, template = sys.argv[1:3]
    path = model_dir + "/tokenizer.json"
    tj = json.load(open(path))
    vocab = tj["model"]["vocab"]
    piece_of = {i: p for p, i in vocab.items()}
    dropped = {piece_of[i] for i in THINK}
    for p in dropped:
        del vocab[p]

    def parts(m):
        return m.split(" ") if isinstance(m, str) else m
    merges = tj["model"]["merges"]
    assert not any(set(parts(m)) & dropped for m in merges), "a merge builds on a dropped piece"
    tj["model"]["merges"] = [m for m in merges if "".join(parts(m)) not in dropped]
    for i, text in THINK.items():
        tj["added_tokens"].append({"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                                   "normalized": False, "special": False})
    json.dump(tj, open(path, "w"), ensure_ascii=False)
    cfg_path = model_dir + "/tokenizer_config.json"
    cfg = json.load(open(cfg_path))
    cfg["chat_template"] = open(template, encoding="utf-8").read()
    json.dump(cfg, open(cfg_path, "w"), ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
