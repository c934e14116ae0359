#!/usr/bin/env python3
"""Reports the functions of src/ and kernels/ longer than 80 lines that carry no reason.

A function's length is the lines from its opening brace to its closing brace. A long function
passes when the comment directly above it (above its signature, and above a `template <...>`
line if it has one) says why it is one function: the comment must contain the words
"one function", e.g. `// One function: the lexer's states share the cursor (a state machine).`
Anything else over the limit is reported as `path:line: name is N lines (limit 80)` and the exit
status is 1.

Functions are found by brace matching on the text with comments, string literals and
preprocessor lines blanked out: at namespace, class or file scope, a `{` whose header (the text
since the previous `;`, `{` or `}` at that scope) has a parenthesis and no top-level `=` opens a
function; its lambdas and nested blocks count as part of it. Braced initializers in a
constructor's member-initializer list and braced default arguments are stepped over.
Usage: scripts/check_function_length.py [repository root] [--limit N] [--list]
       (--list prints every function over the limit, reasoned or not; the `function_length`
       test runs it without.)
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
REASON = re.compile(r"one function", re.IGNORECASE)
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union)\b")
DEFAULT_LIMIT = 80


def blank_out(text):
    """The text with comments, string/char literals and preprocessor lines replaced by spaces,
    newlines kept, so that offsets and line numbers stay those of the file."""
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":  # a directive, with its continuation lines
                j = j + 2 if text[j] == "\\" and j + 1 < n else j + 1
            blank(i, j)
            i = j
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            blank(i, j)
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i + 1:i + 2].isalnum():
                i += 1  # a digit separator (1'000'000)
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def top_level_after_last_paren(header):
    """The header's text after its last top-level `)` (qualifiers, trailing return, initializers)."""
    depth, last = 0, -1
    for k, ch in enumerate(header):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                last = k
    return header[last + 1:] if last >= 0 else ""


def has_top_level_equals(header):
    depth = 0
    for k, ch in enumerate(header):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth = max(0, depth - 1)
        elif ch == "=" and depth == 0 and header[k + 1:k + 2] != "=" and header[k - 1:k] not in ("=", "!", "<", ">"):
            if not header[:k].rstrip().endswith("operator"):
                return True
    return False


def in_member_initializer_list(header, code, brace):
    """True when this `{` braces a member's initializer (`: x_{1}`), not the constructor's body."""
    tail = top_level_after_last_paren(header).replace("::", "")
    if ":" not in tail:
        return False
    k = brace - 1
    while k >= 0 and code[k].isspace():
        k -= 1
    return k >= 0 and (code[k].isalnum() or code[k] in "_>")


def matching_brace(code, brace):
    depth = 0
    for k in range(brace, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


ATTRIBUTES = re.compile(r"__attribute__\s*\(\(.*?\)\)|__launch_bounds__\s*\([^)]*\)|\[\[.*?\]\]", re.DOTALL)


def function_name(header):
    header = ATTRIBUTES.sub(" ", header)
    before = header[:header.find("(")] if "(" in header else header
    words = re.findall(r"[A-Za-z_~][A-Za-z_0-9:~<>,]*|operator\S*", before)
    return words[-1] if words else "?"


def find_functions(code):
    """(start offset of the header, open brace, close brace, name) of every function."""
    found = []
    scopes = [0]  # start offsets of the header being gathered at each open non-function scope
    header_start = 0
    k, n = 0, len(code)
    while k < n:
        ch = code[k]
        if ch == ";":
            header_start = k + 1
        elif ch == "}":
            header_start = k + 1
        elif ch == "{":
            header = code[header_start:k]
            if header.count("(") > header.count(")") or in_member_initializer_list(header, code, k):
                # a braced default argument, or a member's braced initializer: part of the header
                k = matching_brace(code, k) + 1
                continue
            close = matching_brace(code, k)
            stripped = header.strip()
            if SCOPE_KEYWORDS.search(stripped) and "(" not in stripped.split("{")[0] or stripped.startswith("extern"):
                header_start = k + 1  # namespace, class or extern "C": its members are scanned
            elif "(" in stripped and not has_top_level_equals(stripped):
                found.append((header_start, k, close, function_name(stripped)))
                header_start = close + 1
                k = close + 1
                continue
            else:  # an initializer, an enum, a namespace-scope lambda: data, stepped over
                header_start = close + 1
                k = close + 1
                continue
        k += 1
    return found


def line_of(code, offset):
    return code.count("\n", 0, offset) + 1


def has_reason(lines, header_line):
    """A comment directly above the signature (or its template line) that says "one function"."""
    k = header_line - 2  # 0-based index of the line above
    while k >= 0 and lines[k].strip().startswith("template"):
        k -= 1
    comment = []
    while k >= 0 and lines[k].strip().startswith(("//", "*", "/*")):
        comment.append(lines[k])
        k -= 1
    return bool(REASON.search(" ".join(comment)))


def long_functions(path, limit):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    code = blank_out(text)
    lines = text.split("\n")
    for header_start, brace, close, name in find_functions(code):
        length = line_of(code, close) - line_of(code, brace) + 1
        if length <= limit:
            continue
        first = header_start
        while first < brace and code[first].isspace():
            first += 1
        header_line = line_of(code, first)
        yield header_line, name, length, has_reason(lines, header_line)


def source_files(root):
    for top in ("src", "kernels"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(dirpath, name)


def main(argv):
    parser = argparse.ArgumentParser(description="Functions over the limit without a reason comment.")
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    parser.add_argument("--list", action="store_true", help="also print the reasoned ones")
    options = parser.parse_args(argv[1:])
    root, limit, list_all = os.path.abspath(options.root), options.limit, options.list
    failures = 0
    for path in source_files(root):
        rel = os.path.relpath(path, root)
        for line, name, length, reasoned in long_functions(path, limit):
            if reasoned and not list_all:
                continue
            failures += 0 if reasoned else 1
            note = " (has a reason)" if reasoned else ""
            print(f"{rel}:{line}: {name} is {length} lines (limit {limit}){note}")
    if failures:
        print(f"{failures} function(s) over {limit} lines without a \"one function\" reason comment above them")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
