#!/usr/bin/env bash
# Fill fuzz/corpus/<target>/ with seeds (not committed): the fixtures, PostgreSQL's regression
# SQL (../shared/corpus), the PL/pgSQL bodies found in both, the Rust fixtures and sources, and
# the TOML examples of README and docs/ and the fixtures' txlint.toml files.
set -euo pipefail
cd "$(dirname "$0")"
root=..
pg=../../shared/corpus/postgres-regress
mkdir -p corpus/sql corpus/plpgsql corpus/rust corpus/config
# One seed per file, named by its path (fixtures repeat names like up.sql).
seed() { while read -r f; do cp "$f" "corpus/$1/$(echo "${f#../}" | tr '/' '_')"; done; }
find "$root/fixtures" -name '*.sql' | seed sql
# The small corpus files: libFuzzer favours short inputs, and mutations reach the same code.
[ -d "$pg" ] && find "$pg" -name '*.sql' -size -64k | seed sql
find "$root/fixtures" "$root/src" -name '*.rs' | seed rust
python3 - "$root/fixtures" "$pg" <<'PY'
import pathlib, re, sys, hashlib
bodies = set()
for d in sys.argv[1:]:
    for p in pathlib.Path(d).rglob("*.sql"):
        text = p.read_text(errors="replace")
        for m in re.finditer(r"(\$[A-Za-z_]*\$)(.*?)\1", text, re.S):
            if "BEGIN" in m.group(2).upper() and len(m.group(2)) < 16384:
                bodies.add(m.group(2))
for b in bodies:
    name = hashlib.sha1(b.encode()).hexdigest()[:16]
    pathlib.Path("corpus/plpgsql", name).write_text(b)
blocks = [b for doc in ["../README.md", *sorted(pathlib.Path("../docs").glob("*.md"))]
          for b in re.findall(r"```toml\n(.*?)```", pathlib.Path(doc).read_text(), re.S)]
for p in pathlib.Path("../fixtures").rglob("txlint.toml"):
    blocks.append(p.read_text())
for i, b in enumerate(blocks):
    pathlib.Path("corpus/config", f"doc{i}.toml").write_text(b)
PY
for t in sql plpgsql rust config; do
  echo "$t: $(find "corpus/$t" -type f | wc -l) seeds"
done
