#!/usr/bin/env python3
"""`pipebench list --json` against `pipebench list`: the JSON parses, and each
section of the human table names exactly the entries of its JSON list, in the
same order (both are printed from the registries).

usage: list_json_check.py PIPEBENCH
"""
import json
import subprocess
import sys

# Human table heading (its first word) -> JSON list.
SECTIONS = {"schedules": "schedules", "partitions": "partitions", "backends": "backends",
            "transports": "transports", "collectors": "collectors", "models": "models",
            "devices": "devices"}


def table_names(text):
    names, section = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            section = SECTIONS.get(line.split()[0])
            if section:
                names[section] = []
        elif line.startswith("  ") and section:
            names[section].append(line.split()[0])
    return names


def main():
    pipebench = sys.argv[1]
    doc = json.loads(subprocess.run([pipebench, "list", "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    table = table_names(subprocess.run([pipebench, "list"], check=True,
                                       capture_output=True, text=True).stdout)
    problems = []
    if doc.get("schema") != "pipebench.list/1":
        problems.append(f"schema is {doc.get('schema')!r}")
    for section, key in SECTIONS.items():
        listed = [e["name"] for e in doc.get(key, [])]
        if not listed:
            problems.append(f"{key}: empty in the JSON")
        if listed != table.get(section):
            problems.append(f"{key}: JSON {listed} but the table lists {table.get(section)}")
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print(f"ok: {sum(len(doc[k]) for k in SECTIONS.values())} entries in {len(SECTIONS)} lists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
