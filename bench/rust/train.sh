#!/bin/sh
# bench/rust/train.sh RG CORPUS: the ripgrep benchmark's training workload (the profile is
# recorded on this): seven searches of one corpus (the Rust toolchain's HTML documentation),
# each exercising another part of ripgrep (regex with a literal prefix, case-insensitive
# alternation, word boundaries, a fixed string, file listing, counted repetitions, inverted
# match). One thread (-j1), so that runs are repeatable.
set -e
RG=$1
C=$2
"$RG" -j1 -c 'fn [a-z_]+\(' "$C" >/dev/null
"$RG" -j1 -i -c 'iterator|closure' "$C" >/dev/null
"$RG" -j1 -w -c -e impl -e trait "$C" >/dev/null
"$RG" -j1 -c -F 'unwrap()' "$C" >/dev/null
"$RG" -j1 -l '[A-Z][a-z]+Error' "$C" >/dev/null
"$RG" -j1 --count-matches '[0-9]{4}-[0-9]{2}-[0-9]{2}' "$C" >/dev/null || true
"$RG" -j1 -c -v 'span' "$C" >/dev/null
