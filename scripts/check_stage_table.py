#!/usr/bin/env python3
"""Holds the stage table of docs/how-it-works.md ("## Stages") to the folders of src/layers.txt.

Every folder a library of src/layers.txt is built from must have its row in the table (first
column, `src/x/` in backquotes), and every folder the table names must exist in the tree; what is
missing either way is reported, one line each, and the exit status is 1.
Usage: scripts/check_stage_table.py [repository root]   (the layers.stage_table test runs it)
"""
import os
import re
import sys

TABLE_DOC = os.path.join("docs", "how-it-works.md")
TABLE_HEADING = "## Stages"
FOLDER_CELL = re.compile(r"^\|\s*`([^`]+?)/?`\s*\|")


def layer_folders(root):
    folders = []
    with open(os.path.join(root, "src", "layers.txt")) as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("#"):
                folders.extend(line.split()[1].split(","))
    return folders


def table_folders(root):
    """(folder, line number) for each row of the stage table."""
    rows, in_section = [], False
    with open(os.path.join(root, TABLE_DOC)) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("## "):
                in_section = line.strip() == TABLE_HEADING
            elif in_section:
                match = FOLDER_CELL.match(line)
                if match:
                    rows.append((match.group(1).rstrip("/"), n))
    return rows


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    rows = table_folders(root)
    if not rows:
        print(f"{TABLE_DOC}: no table of folders under '{TABLE_HEADING}'")
        return 1
    problems = []
    named = {folder for folder, _ in rows}
    for folder in layer_folders(root):
        if folder not in named:
            problems.append(f"{TABLE_DOC}: src/layers.txt builds '{folder}/', which the stage table does not name")
    for folder, n in rows:
        if not os.path.isdir(os.path.join(root, folder)):
            problems.append(f"{TABLE_DOC}:{n}: the stage table names '{folder}/', which does not exist")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
