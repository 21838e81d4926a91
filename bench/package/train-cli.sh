#!/bin/sh
# bench/package/train-cli.sh JQ WORKDIR: the second training run of bench/package/run, short
# enough for callgrind: a few jq command lines over a small document, through the options a
# user types (-S, -r, -c, --arg, --argjson, --slurp, -n, -f, --tab, -e), so that the exact call
# counts reach jq's own command-line code as well as libjq. One line of checksums on standard
# output, the same for every correct build of jq.
set -eu
jq=$1
w=$2
mkdir -p "$w"
printf '{"a":[1,2,{"b":"x"}],"n":{"k":[3,1,2]}}\n{"a":[],"n":{"k":[9]}}\n' >"$w/small.json"
printf 'def f: .n.k | sort | map(. * $m); [inputs | f] | add\n' >"$w/prog.jq"
{
    "$jq" -S --arg x 1 '.a[2].b? + $x' "$w/small.json"
    "$jq" -r -c --slurp 'map(.n.k | length) | @tsv' "$w/small.json"
    "$jq" -n --tab --argjson m 2 -f "$w/prog.jq" "$w/small.json"
    "$jq" -e '.n.k[0] > 0' "$w/small.json"
} | cksum | cut -d' ' -f1
