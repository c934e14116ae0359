"""Writes a Phi-3-mini tokenizer into a model folder: Llama-2's tokenizer.json (the llama-spm test
suite's) with the eleven tokens Phi-3 adds (32000-32010, as microsoft/Phi-3-mini-4k-instruct's
added_tokens_decoder lists them), and a tokenizer_config.json with Phi-3's BOS/EOS, add_bos_token
and the chat template of tests/data/chat_templates/phi-3-mini-instruct.jinja.

usage: phi3_tokenizer.py LLAMA_SPM_DIR TEMPLATE.jinja MODEL_DIR
"""
import json
import sys

PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
              "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]


def main():
    spm, template, out = sys.argv[1:4]
    tok = json.load(open(f"{spm}/tokenizer.json", encoding="utf-8"))
    cfg = json.load(open(f"{spm}/tokenizer_config.json", encoding="utf-8"))
    for i, content in enumerate(PHI3_ADDED):
        entry = {"id": 32000 + i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
        tok["added_tokens"].append(entry)
        cfg["added_tokens_decoder"][str(32000 + i)] = {k: v for k, v in entry.items() if k not in ("id", "content")} | {
            "content": content}
    cfg.update({"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                "add_bos_token": True, "chat_template": open(template, encoding="utf-8").read()})
    json.dump(tok, open(f"{out}/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
    json.dump(cfg, open(f"{out}/tokenizer_config.json", "w", encoding="utf-8"), ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
