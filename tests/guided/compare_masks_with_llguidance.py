"""The constraint engine's token masks against llguidance's (the Rust engine behind llama.cpp's and
vLLM's guidance backend) at every step of given walks.

  compare_masks_with_llguidance.py MASKS_BIN TOKENIZER_JSON EOS_ID CASES_JSONL LABEL

CASES_JSONL: one object a line, {"id", the row's guided_* keys, and "tokens" (a generated row's
tokens, EOS left out) or "text" (walked greedily, see guided_masks_main.cpp)}. MASKS_BIN writes our
mask before every token and after the last; llguidance builds its vocabulary from TOKENIZER_JSON
itself (its own byte mapping of every token) and walks the same tokens. Two comparisons a case:

  regex:  llguidance on the regex our engine compiles the constraint to. This checks the engine
          proper (regex -> byte DFA -> per-state token masks, and the bytes of each token).
  source: llguidance on the constraint as the user wrote it (its JSON Schema compiler, its regex
          syntax, its choice grammar), configured to the subset's documented semantics (see
          normalized_schema). This checks the schema -> regex translation too.

Exits 1 on any disagreement, printing the step, the output so far and the tokens only one engine
allows. Prints "<label>: <cases> cases, <steps> steps compared (x2), 0 mismatches" when all agree.
"""
import base64
import json
import re
import subprocess
import sys

import llguidance

# Where the subset's semantics differ from JSON Schema's defaults, llguidance is told ours
# (docs/guided.md, "What is supported"):
#  - compact JSON: no whitespace between tokens, "," and ":" as separators;
#  - \uXXXX escapes of any character, as our string regex admits;
#  - the properties written are in the schema's order, those in `required` always and no other
#    property: the schema's required, additionalProperties false (llguidance writes properties in
#    the schema's order too);
#  - oneOf is kept: ours refuses branches that share an output, so where it compiles, exactly one
#    branch matches each output and oneOf means what anyOf does;
#  - max_string_length / max_items bound the strings and arrays a schema leaves unbounded;
#  - at most 16 integer digits: minimum/maximum +-(10^16 - 1) on integers;
#  - a value a schema leaves free is any JSON value nested at most 2 levels;
#  - the string formats are this project's regexes (a format is a definition, not engine
#    behaviour): each becomes its pattern.
OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":",
           "json_allow_general_unicode_escapes": True}
INT_BOUND = 10**16 - 1
FORMATS = {
    "date-time": r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$",
    "date": r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])$",
    "time": r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$",
    "uuid": r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "email": r"^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,30}@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?(?:\.[a-zA-Z]{2,10}){1,2}$",
    "ipv4": r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$",
}
FREE_DEPTH = 2


def free_value(depth, max_len, max_items):
    """Any JSON value nested at most `depth` levels, as our free_value regex."""
    string = {"type": "string", **({"maxLength": max_len} if max_len else {})}
    alts = [string, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
    if depth > 0:
        inner = free_value(depth - 1, max_len, max_items)
        obj = {"type": "object", "additionalProperties": inner}
        if max_items:
            obj["maxProperties"] = max_items
        if max_len:  # keys bounded as our free object's (llguidance has no propertyNames)
            obj.update(patternProperties={"^[\\s\\S]{0,%d}$" % max_len: inner}, additionalProperties=False)
        alts.append(obj)
        alts.append({"type": "array", "items": inner, **({"maxItems": max_items} if max_items else {})})
    return {"anyOf": alts}


# The keywords our translation reads first: a schema holding one of them is that keyword alone
# (its siblings are not applied; for $ref, as drafts 4-7 say).
FIRST = ("$ref", "const", "enum", "anyOf", "oneOf", "allOf")


def repeated_atom(pattern):
    """Whether a pattern is one class, escape or '.' repeated (X+ / X*): our translation bounds
    those by max_string_length."""
    return re.fullmatch(r"(\[(\\.|[^\]\\])+\]|\.|\\.)[+*]", pattern) is not None


def normalized_schema(s, max_len, max_items, depth=FREE_DEPTH):
    """The schema llguidance must see to mean what ours means (see OPTIONS above)."""
    if s is True or (isinstance(s, dict) and not ({"type", "properties", "items", *FIRST} & s.keys())):
        return free_value(depth, max_len, max_items)
    if not isinstance(s, dict):
        return s
    for k in FIRST:
        if k in s:
            keep = {k: s[k]}
            for d in ("definitions", "$defs"):
                if d in s:
                    keep[d] = s[d]
            s = keep
            break
    if "type" not in s and "properties" in s:  # properties without a type: an object
        s = {**s, "type": "object"}
    elif "type" not in s and "items" in s:
        s = {**s, "type": "array"}
    out = {}
    for k, v in s.items():
        if k in ("properties", "definitions", "$defs"):
            out[k] = {name: normalized_schema(sub, max_len, max_items) for name, sub in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = normalized_schema(v, max_len, max_items)
        elif k in ("anyOf", "oneOf", "allOf"):
            out[k] = [normalized_schema(sub, max_len, max_items) for sub in v]
        else:
            out[k] = v
    types = s.get("type") if isinstance(s.get("type"), list) else [s.get("type")]
    if "properties" in s:
        out["additionalProperties"] = False
    elif "object" in types and "additionalProperties" not in s:
        out.update(normalized_schema(free_value(depth, max_len, max_items)["anyOf"][4], max_len, max_items))
    if "string" in types and "format" in s:
        out["pattern"] = FORMATS[out.pop("format")]
    elif "pattern" in s:  # matched whole, as outlines does (JSON Schema's would be a search)
        pattern = s["pattern"].removeprefix("^")
        pattern = pattern[:-1] if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
        out["pattern"] = "^(?:" + pattern + ")$"
        if "maxLength" not in s and max_len and repeated_atom(pattern):
            out["maxLength"] = max(s.get("minLength", 0), max_len)
    if "string" in types and "maxLength" not in s and "pattern" not in s and "format" not in s and max_len:
        out["maxLength"] = max(s.get("minLength", 0), max_len)
    if "array" in types and "maxItems" not in s and max_items:
        out["maxItems"] = max(s.get("minItems", 0), max_items)
    if "integer" in types:
        out.setdefault("minimum", -INT_BOUND)
        out["maximum"] = INT_BOUND
    return out


def ascii_classes(regex):
    """Our regex syntax for Rust's: \\d \\w \\s are ASCII in ours, Unicode in Rust's."""
    table = {"d": "0-9", "w": "0-9a-zA-Z_", "s": r" \t\n\r\f\v"}
    out, i, in_class = [], 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            e = regex[i + 1]
            if e.lower() in table:
                body = table[e.lower()]
                if in_class:
                    assert e.islower(), f"negated class escape inside a class: {regex}"
                    out.append(body)
                else:
                    out.append(("[^" if e.isupper() else "[") + body + "]")
            else:
                out.append(regex[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            if regex[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if regex[i + 1:i + 2] == "]":
                out.append("\\]")
                i += 1
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def source_grammar(case):
    max_len = case.get("guided_max_string_length", 0)
    max_items = case.get("guided_max_items", 0)
    if "guided_json" in case:
        schema = case["guided_json"]
        if isinstance(schema, str):
            schema = json.loads(schema)
        # A row's schema is read with its keys in sorted order, so properties are written so.
        schema = json.loads(json.dumps(schema, sort_keys=True))
        return llguidance.LLMatcher.grammar_from_json_schema(
            normalized_schema(schema, max_len, max_items), overrides=OPTIONS)
    if case.get("guided_json_object"):
        schema = normalized_schema({"type": "object"}, max_len, max_items, FREE_DEPTH + 1)
        return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=OPTIONS)
    if "guided_regex" in case:
        return llguidance.grammar_from("regex", ascii_classes(case["guided_regex"]))
    if "guided_choice" in case:
        return llguidance.grammar_from("choice", json.dumps(case["guided_choice"]))
    raise ValueError(f"case {case['id']}: no guided_* key")


def bits(mask, vocab):
    """A bitmask (bit i of byte i // 8 = token i) as an int over the vocabulary's ids only: the two
    engines pad their masks to different lengths."""
    return int.from_bytes(mask, "little") & ((1 << vocab) - 1)


def ids(mask_bits, vocab):
    raw = mask_bits.to_bytes((vocab + 7) // 8, "little")
    return {8 * k + j for k, byte in enumerate(raw) if byte for j in range(8) if byte >> j & 1}


# The differences the two engines have by design, each explained; a step whose masks differ by
# these alone counts as explained, any other difference fails the test:
#  - forced: where the next bytes are forced (after '{' the '"' of the first key, after "ha" of
#    "happy" the "ppy"), llguidance's mask offers only the token its tokenizer would write them
#    with ("pp"), though it accepts the others when given them (validate_tokens); we allow every
#    token whose bytes keep a match possible ("p", and byte-fallback twins such as "<0x70>"), as a
#    model may write either. Explained when llguidance has forced bytes there and accepts each token
#    only we allow.
#  - DEL and \/: RFC 8259 lets a JSON string hold U+007F unescaped (only U+0000-U+001F must be
#    escaped) and write '/' as the escape \/, as our string regex does; llguidance's JSON strings
#    have neither (no option turns them on). Source comparison of JSON only.
#  - digits: our numbers have at most 16 digits before and after the point and 3 in the exponent
#    (docs/guided.md); llguidance's are unbounded. Explained where the output so far ends with such
#    a full run of digits and only llguidance allows more digits (source comparison of JSON only).
TOO_MANY_DIGITS = re.compile(rb"(?:[0-9]{17}|[eE][+-]?[0-9]{4,})$")


def explained(m, only_ours, only_theirs, tok, json_source, so_far):
    if only_theirs:
        past_bound = all(re.fullmatch(rb"[0-9]+", tok.decode_bytes([t]))
                         and TOO_MANY_DIGITS.search(so_far + tok.decode_bytes([t])) for t in only_theirs)
        return {"digits"} if json_source and not only_ours and past_bound else None
    forced = bool(m.compute_ff_bytes())
    why = set()
    for t in only_ours:
        if forced and m.validate_tokens([t]) == 1:
            why.add("forced")
        elif json_source and b"\x7f" in tok.decode_bytes([t]):
            why.add("DEL")
        elif json_source and b"\\/" in so_far[-1:] + tok.decode_bytes([t]):
            why.add("\\/")
        else:
            return None
    return why


def walk(tok, grammar, ours, label, case_id, json_source):
    """Compares masks along the walk; returns (steps, mismatch descriptions, explained counts)."""
    m = llguidance.LLMatcher(tok, grammar, log_level=0)
    if m.is_error():
        return 0, [f"{label} {case_id}: llguidance refused the grammar: {m.get_error()}"], {}
    steps, bad, why_counts = 0, [], {}
    tokens = ours["tokens"]
    for i, b64 in enumerate(ours["masks"]):
        mine = bits(base64.b64decode(b64), tok.vocab_size)
        theirs = bits(m.compute_bitmask(), tok.vocab_size)
        steps += 1
        if mine != theirs:
            only_ours, only_theirs = ids(mine & ~theirs, tok.vocab_size), ids(theirs & ~mine, tok.vocab_size)
            why = explained(m, only_ours, only_theirs, tok, json_source, tok.decode_bytes(tokens[:i]))
            if why is not None:
                for w in why:
                    why_counts[w] = why_counts.get(w, 0) + 1
            else:
                show = lambda ids: [f"{t}:{tok.dbg_tokens([t])}" for t in sorted(ids)[:8]]
                bad.append(f"{label} {case_id} step {i} after {tok.decode_bytes(tokens[:i])!r}: only ours allows "
                           f"{len(only_ours)} {show(only_ours)}, only llguidance allows {len(only_theirs)} {show(only_theirs)}")
                break
        if i == len(tokens):
            break
        if not m.consume_token(tokens[i]):
            bad.append(f"{label} {case_id} step {i}: llguidance refused token {tokens[i]}: {m.get_error()}")
            break
    return steps, bad, why_counts


def main():
    masks_bin, tokenizer_json, eos, cases_path, label = sys.argv[1:6]
    cases = [json.loads(line) for line in open(cases_path)]
    requests = "".join(json.dumps({**c, "eos": [int(eos)]}) + "\n" for c in cases)
    answers = subprocess.run([masks_bin, tokenizer_json], input=requests, capture_output=True, text=True, check=True)
    answers = [json.loads(line) for line in answers.stdout.splitlines()]
    tok = llguidance.LLTokenizer(open(tokenizer_json).read(), eos_token=int(eos))
    steps, bad, why_counts = 0, [], {}
    for case, ours in zip(cases, answers, strict=True):
        if "error" in ours:
            bad.append(f"{case['id']}: our engine: {ours['error']}")
            continue
        if ours["dead_at"] is not None:
            bad.append(f"{case['id']}: our engine refused walk token {ours['dead_at']}")
            continue
        for kind, grammar in (("regex", llguidance.grammar_from("regex", ascii_classes(ours["regex"]))),
                              ("source", source_grammar(case))):
            json_source = kind == "source" and ("guided_json" in case or "guided_json_object" in case)
            n, why, counts = walk(tok, grammar, ours, kind, case["id"], json_source)
            steps += n
            bad += why
            for k, v in counts.items():
                why_counts[k] = why_counts.get(k, 0) + v
    for b in bad:
        print("MISMATCH", b)
    print(f"{label}: {len(cases)} cases, {steps} steps compared (regex and source), {len(bad)} mismatches; "
          f"steps differing by an explained difference only: {why_counts or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
