#!/usr/bin/env python3
"""Reach of the Rust front-end on the applications: per application, the Rust statements txlint
places (a known executor and transaction) and those it sends through an unknown executor, which
no executor-dependent rule can judge. Reads `txlint model` of each tree that apps.py exported
(~/.cache/txlint-apps, or $TXLINT_APPS_CACHE). Usage: reach.py path/to/txlint [OUTDIR]
Prints `name  statements  known  unknown-transaction  unknown-executor` per line, then totals."""
import os, re, subprocess, sys, collections
from concurrent.futures import ThreadPoolExecutor
binary = os.path.abspath(sys.argv[1]); outdir = sys.argv[2] if len(sys.argv) > 2 else None
cache = os.environ.get("TXLINT_APPS_CACHE") or os.path.expanduser("~/.cache/txlint-apps")
names = sorted(os.listdir(cache))
def run(name):
    p = subprocess.run(["timeout", "600", binary, "model", "."], capture_output=True, text=True, cwd=os.path.join(cache, name))
    if outdir:
        open(os.path.join(outdir, name + ".model"), "w").write(p.stdout)
    c = collections.Counter(); unit_rs = False; hdr = None
    for l in p.stdout.splitlines():
        if not l.startswith(" "):
            unit_rs = ".rs:" in l.split(" ")[0]; continue
        if re.match(r"^  \S", l):
            hdr = l.strip(); continue
        if unit_rs and re.match(r"^    \S+:\d+:\d+ ", l) and hdr:
            k = "unknown" if hdr.startswith("unknown transaction via unknown") else ("unknown-txn" if hdr.startswith("unknown transaction") else ("known"))
            c[k] += 1
    return name, c
total = collections.Counter()
with ThreadPoolExecutor(2) as ex:
    for name, c in ex.map(run, names):
        t = sum(c.values())
        total.update(c)
        if t:
            print(f"{name}\t{t}\t{c['known']}\t{c['unknown-txn']}\t{c['unknown']}")
t = sum(total.values())
print(f"total\t{t}\t{total['known']}\t{total['unknown-txn']}\t{total['unknown']}"
      f"\t({total['unknown'] / t if t else 0:.0%} on an unknown executor)")
