#!/usr/bin/env python3
"""Holds every `#include "folder/..."` in src/ and kernels/ to the layer table src/layers.txt.

A file may include headers of its own library and of the libraries that library depends on,
directly or through them; anything else (a header of a library above it, or of one beside it it
does not declare) is reported with file, line and the two libraries, and the exit status is 1.
Also fails when a folder of src/ holding sources is in no library of the table.
Usage: scripts/check_layers.py [repository root]   (the layers.includes test runs it)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def read_table(path):
    """library -> (folders, direct dependencies), in table order."""
    table = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 3:
                sys.exit(f"{path}:{n}: want 'library folders depends-on', got {line.strip()!r}")
            name, folders, deps = fields
            deps = [] if deps == "-" else [d.rstrip("?") for d in deps.split(",")]
            for d in deps:
                if d not in table:
                    sys.exit(f"{path}:{n}: library '{name}' depends on '{d}', which is not listed above it")
            table[name] = (folders.split(","), deps)
    return table


def closure(table, name):
    seen, todo = set(), [name]
    while todo:
        lib = todo.pop()
        if lib not in seen:
            seen.add(lib)
            todo.extend(table[lib][1])
    return seen


def library_of(folder_of_lib, rel_path):
    """The library whose folder is the longest prefix of rel_path (None when none is)."""
    best, best_len = None, -1
    for folder, lib in folder_of_lib.items():
        if (rel_path == folder or rel_path.startswith(folder + "/")) and len(folder) > best_len:
            best, best_len = lib, len(folder)
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    table = read_table(os.path.join(root, "src", "layers.txt"))
    folder_of_lib = {folder: lib for lib, (folders, _) in table.items() for folder in folders}
    allowed = {lib: closure(table, lib) for lib in table}
    problems = []
    for top in ("src", "kernels"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if rel == os.path.join("src", "main.cpp"):
                    continue  # the executable sits above every library
                lib = library_of(folder_of_lib, os.path.dirname(rel))
                if lib is None:
                    problems.append(f"{rel}: its folder is in no library of src/layers.txt")
                    continue
                with open(os.path.join(root, rel), errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # same-folder includes ("kernels.h") and system headers
                        target = library_of(folder_of_lib, "src/" + os.path.dirname(m.group(1)))
                        if target is None:
                            problems.append(f"{rel}:{n}: includes \"{m.group(1)}\", in no library of src/layers.txt")
                        elif target not in allowed[lib]:
                            problems.append(f"{rel}:{n}: library '{lib}' includes \"{m.group(1)}\" of library "
                                            f"'{target}', which it does not depend on (src/layers.txt)")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layers of src/layers.txt")
        return 1
    print(f"check_layers: every include of src/ and kernels/ follows src/layers.txt ({len(table)} libraries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
