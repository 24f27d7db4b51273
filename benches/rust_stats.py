#!/usr/bin/env python3
"""Counts, from `txlint model` output, the SQL statements found in Rust functions by executor.

Usage: benches/rust_stats.py PATH...   (runs target/release/txlint model on each PATH)
"""
import re
import subprocess
import sys
from collections import Counter

for path in sys.argv[1:]:
    out = subprocess.run(["target/release/txlint", "model", path], capture_output=True, text=True).stdout
    in_fn = False
    executor = None
    counts = Counter()
    fns = 0
    for line in out.splitlines():
        if not line.startswith(" ") and " fn " in line or line.endswith(" fn"):
            in_fn, fns = True, fns + 1
        elif not line.startswith(" "):
            in_fn = False
        elif line.startswith("  ") and not line.startswith("    "):
            executor = re.sub(r".* via ", "", line).split(",")[0]
        elif in_fn and line.startswith("    "):
            counts[executor] += 1
    total = sum(counts.values())
    print(f"{path}: {fns} fns, {total} SQL statements in Rust: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
