#!/bin/sh
# bench/rust/heldout.sh RG CORPUS: the ripgrep benchmark's held-out workload: other patterns
# and flags (only-matching, smart case, context lines, glob filters, JSON output) on another
# corpus (C headers, /usr/include). Never recorded; measured only.
set -e
RG=$1
C=$2
"$RG" -j1 -c 'static inline [a-z_]+' "$C" >/dev/null
"$RG" -j1 -S -w -c 'mutex|spinlock' "$C" >/dev/null
"$RG" -j1 -o '0x[0-9a-fA-F]{8}' "$C" >/dev/null
"$RG" -j1 -C2 -g '*.h' 'typedef struct' "$C" >/dev/null
"$RG" -j1 --json 'EXPORT_SYMBOL' "$C" >/dev/null || true
