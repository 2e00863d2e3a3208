#!/usr/bin/env python3
"""Checks Docs/Concepts.md, "How a value travels": every hop names a function that exists.

Each numbered step of the section starts with `Sources/<path>.swift:<function>` (a backquoted
hop). The check fails if a named file is missing, if the file declares no function, initializer,
property or case of that name, if the walk has more than 8 hops, or if more than 1 hop is marked
as a return ("(return" right after the hop).
"""
import re
import sys
from pathlib import Path

MAX_HOPS = 8
MAX_RETURNS = 1

root = Path(__file__).resolve().parent.parent
text = (root / "Docs/Concepts.md").read_text(encoding="utf-8")
section = re.search(r"^### How a value travels\n(.*?)(?=^#{1,3} )", text + "\n# end", re.S | re.M)
if not section:
    sys.exit('error: Docs/Concepts.md has no "### How a value travels" section')
body = section.group(1)

hop_pattern = re.compile(r"^\d+\. `(Sources/[^`:]+\.swift):([A-Za-z_][A-Za-z0-9_]*)(?:\([^`]*\))?`(.*)$", re.M)
hops = hop_pattern.findall(body)
steps = re.findall(r"^\d+\. ", body, re.M)
errors = []
if len(steps) != len(hops):
    errors.append(f"{len(steps)} numbered steps but {len(hops)} start with `Sources/<file>.swift:<function>`")
if not hops:
    errors.append("no hop found")
if len(hops) > MAX_HOPS:
    errors.append(f"{len(hops)} hops; at most {MAX_HOPS}")
returns = [h for h in hops if h[2].lstrip().startswith("(return")]
if len(returns) > MAX_RETURNS:
    errors.append(f"{len(returns)} hops are returns; at most {MAX_RETURNS}")
for path, name, _ in hops:
    file = root / path
    if not file.is_file():
        errors.append(f"{path}: no such file")
        continue
    source = file.read_text(encoding="utf-8")
    if name == "init":
        declared = re.search(r"\binit\s*[(<]", source)
    else:
        declared = re.search(rf"\b(func|var|let|case)\s+{re.escape(name)}\b", source)
    if not declared:
        errors.append(f"{path}:{name}: the file declares no function named {name}")
if errors:
    for error in errors:
        print(f'error: Docs/Concepts.md "How a value travels": {error}', file=sys.stderr)
    sys.exit(1)
print(f"{len(hops)} hops, {len(returns)} return(s), every function found")
