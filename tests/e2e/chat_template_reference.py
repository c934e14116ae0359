"""Renders every kept chat template with Python's jinja2, as Hugging Face's apply_chat_template
does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson filter
and raise_exception global), for every message list in chat_messages.json.

usage: chat_template_reference.py TEMPLATES_DIR MESSAGES.json OUT_DIR
Writes OUT_DIR/<template>__<case>.txt (the rendering) or .raise (the template raised), and
OUT_DIR/<case>.json (the messages), and prints one unit-separator (0x1f) separated "<template> <case> <gen> <bos>
<eos> <kwargs>" line per rendering for the shell script to replay through tpbatch render-chat.
A template's "kwargs" in templates.json (name -> object, e.g. Qwen3's enable_thinking) adds a
rendering of every case with those extra variables, as apply_chat_template(**kwargs) passes them;
<kwargs> is then that object as JSON, else empty.
"""
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    templates_dir, messages_file, out_dir = sys.argv[1:4]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    meta = json.load(open(os.path.join(templates_dir, "templates.json")))
    cases = json.load(open(messages_file))
    for case, messages in cases.items():
        with open(os.path.join(out_dir, case + ".json"), "w", encoding="utf-8") as f:
            json.dump(messages, f, ensure_ascii=False)
    for name in sorted(meta):
        source = open(os.path.join(templates_dir, name + ".jinja"), encoding="utf-8").read()
        template = env.from_string(source)
        bos, eos = meta[name]["bos_token"] or "", meta[name]["eos_token"] or ""
        variants = {"": {}}
        variants.update(meta[name].get("kwargs", {}))
        for variant, kwargs in variants.items():
            for case, messages in cases.items():
                for gen in (True, False):
                    stem = os.path.join(out_dir, "%s__%s__%d%s" % (name, case, gen, "__" + variant if variant else ""))
                    try:
                        text = template.render(messages=messages, add_generation_prompt=gen, bos_token=bos,
                                               eos_token=eos, **kwargs)
                        with open(stem + ".txt", "w", encoding="utf-8", newline="") as f:
                            f.write(text)
                    except jinja2.exceptions.TemplateError as e:
                        with open(stem + ".raise", "w", encoding="utf-8") as f:
                            f.write(str(e))
                    print(name, case, int(gen), bos, eos, variant, json.dumps(kwargs) if variant else "", sep="\x1f")


if __name__ == "__main__":
    main()
