#!/usr/bin/env bash
# Times lld's own C3 (--call-graph-ordering-file) on the scale benchmark's graph, to set beside
# `order_scale`'s c3 row. lld's ordering cost is the difference between a link with the file and
# one without. Usage: crates/order/benches/lld_c3.sh NODES EDGES [SEED]
# Needs: as (binutils), ld.lld, /usr/bin/time; the bench binary is built if missing.
set -euo pipefail
N=${1:?nodes}
M=${2:?edges}
SEED=${3:-42}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
cargo bench -q -p sediment-order --bench order_scale --no-run 2>/dev/null
BIN=$(ls -t target/release/deps/order_scale-* | grep -v '\.d$' | head -1)
"$BIN" "$N" "$M" "$SEED" --dump-lld "$WORK"
as "$WORK/funcs.s" -o "$WORK/funcs.o"
t() { /usr/bin/time -f '%e s wall, %U s user, %M KiB peak' "$@" 2>&1 >/dev/null | tail -1; }
echo "$N nodes, $M edges, seed $SEED"
echo "lld without ordering file: $(t ld.lld -o "$WORK/a.out" "$WORK/funcs.o")"
echo "lld with ordering file:    $(t ld.lld --call-graph-ordering-file="$WORK/cg.txt" -o "$WORK/b.out" "$WORK/funcs.o")"
