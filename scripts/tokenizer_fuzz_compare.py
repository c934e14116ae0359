#!/usr/bin/env python3
"""Compare tpbatch's tokenizer with Hugging Face `tokenizers` on random Unicode strings.

Needs `pip install tokenizers` and a build folder holding libtpbatch_tokenizer.a and
libtpbatch_common.a (e.g. build-tok/). It compiles a
tiny CLI against that library, encodes the same strings with both, and reports every difference
in ids (add_special_tokens false and true) and in decode(ids, skip_special_tokens=False).

  scripts/tokenizer_fuzz_compare.py --build build-tok [--seed 1] [--count 2000] tokenizer.json...

Random characters are drawn only from code points assigned in the Unicode version of Python's
unicodedata: characters assigned later are classified differently by PCRE2's and Oniguruma's
Unicode tables (a known, accepted difference). Exit status 1 when anything differs.
"""
import argparse, json, os, random, subprocess, sys, tempfile, unicodedata

CLI = r'''
#include <iostream>
#include <nlohmann/json.hpp>
#include "tokenizer/tokenizer.h"
int main(int argc, char** argv) {
  auto tok = tpbatch::Tokenizer::load(argv[1]);
  const bool add = std::string(argv[2]) == "1";
  std::string line;
  while (std::getline(std::cin, line)) {
    auto ids = tok->encode(nlohmann::json::parse(line)["text"].get<std::string>(), add);
    nlohmann::json o;
    o["ids"] = ids;
    o["decoded"] = tok->decode(ids, false);
    std::cout << o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}
'''

PIECES = ["a", "Hello", " ", "  ", "\n", "\r\n", "\t", "'s", "'S", "'ll", "1", "123", "12345", "é", "e\u0301",
          "中文", "🦙", "😶\u200d🌫️", "\u00a0", "\u3000", "\u2581", "<s>", "</s>", "<unk>", "<|endoftext|>",
          "ﬁ", "Σ", "ß", "!!", "...", "(", "—", "\u0085", "\u200b", "ÿ", "İ", "x"]


def random_text(rng):
    out = []
    for _ in range(rng.randint(0, 25)):
        r = rng.random()
        if r < 0.6:
            out.append(rng.choice(PIECES))
        elif r < 0.8:
            out.append(chr(rng.randint(0x20, 0x7E)))
        else:
            c = rng.randint(0x80, 0x2FFFF)
            if unicodedata.category(chr(c)) in ("Cn", "Cs", "Co"):
                c = 0x41
            out.append(chr(c))
    return "".join(out)


def build_cli(build_dir, src_dir, work):
    src = os.path.join(work, "tokcli.cpp")
    exe = os.path.join(work, "tokcli")
    with open(src, "w") as f:
        f.write(CLI)
    libs = subprocess.run(["pkg-config", "--libs", "icu-uc", "libpcre2-8"], capture_output=True, text=True,
                          check=True).stdout.split()
    subprocess.run(["g++", "-std=c++20", "-O2", "-I" + os.path.join(src_dir, "src"), src,
                    os.path.join(build_dir, "libtpbatch_tokenizer.a"), os.path.join(build_dir, "libtpbatch_common.a"),
                    *libs, "-o", exe], check=True)
    return exe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="build folder holding libtpbatch_tokenizer.a")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("tokenizers", nargs="+")
    args = ap.parse_args()
    import tokenizers  # noqa: imported late so --help works without it

    src_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rng = random.Random(args.seed)
    texts = [random_text(rng) for _ in range(args.count)]
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        exe = build_cli(os.path.abspath(args.build), src_dir, work)
        payload = "".join(json.dumps({"text": t}) + "\n" for t in texts)
        for path in args.tokenizers:
            hf = tokenizers.Tokenizer.from_file(path)
            for add in (False, True):
                out = subprocess.run([exe, path, "1" if add else "0"], input=payload, capture_output=True,
                                     text=True, check=True).stdout.split("\n")
                for text, line in zip(texts, out):
                    ours = json.loads(line)
                    ids = hf.encode(text, add_special_tokens=add).ids
                    if ours["ids"] != ids:
                        bad += 1
                        print(f"ids differ [{path}, add={add}] {text!r}\n  hf:   {ids}\n  ours: {ours['ids']}")
                    elif ours["decoded"] != hf.decode(ids, skip_special_tokens=False):
                        bad += 1
                        print(f"decode differs [{path}] {text!r}")
    total = len(texts) * len(args.tokenizers) * 2
    print(f"{total - bad}/{total} agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
