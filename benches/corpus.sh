#!/usr/bin/env bash
# Times `txlint check` over PostgreSQL's regression SQL (../shared/corpus/postgres-regress).
# Usage: benches/corpus.sh [runs]   (default 10). Prints the summary line and wall times.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
corpus=../shared/corpus/postgres-regress
cargo build --release --quiet
bin=target/release/txlint
bytes=$(find "$corpus" -name '*.sql' -print0 | xargs -0 cat | wc -c)
"$bin" check "$corpus" --format json --output /dev/null || true
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$bin" check "$corpus" --format json --output /dev/null 2>/dev/null || true
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000000 )))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(( (runs + 1) / 2 ))p")
echo "corpus: $bytes bytes; $runs runs; median ${median} ms; min $(echo "$sorted" | head -1) ms; max $(echo "$sorted" | tail -1) ms"
echo "throughput: $(( bytes * 1000 / (median > 0 ? median : 1) / 1024 )) KiB/s"
