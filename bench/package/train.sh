#!/bin/sh
# bench/package/train.sh JQ WORKDIR (N=records): the training workload of bench/package/run, jq filters over
# generated JSON (a packager's own: what the package's users run). JQ is the jq to run (with
# its libjq found as it would be at run time); WORKDIR receives the JSON and the outputs.
# Deterministic: the same JSON and the same filters every run; one line of checksums on
# standard output, the same for every correct build of jq.
set -eu
jq=$1
w=$2
mkdir -p "$w"
# N records (default 20000): numbers, strings, arrays and nested objects.
n=${N:-20000}
"$jq" -n -c --argjson n "$n" '[range(0; $n) | {id: ., name: "user\(.)", score: (. * 7919 % 1000),
    tags: [range(0; . % 5) | "t\(.)"], geo: {lat: (. % 180 - 90), lon: (. % 360 - 180)},
    active: (. % 3 == 0)}]' >"$w/data.json"
run() { "$jq" "$@" "$w/data.json" | cksum | cut -d' ' -f1; }
{
    run 'map(select(.score > 500)) | length'
    run -c 'group_by(.score % 10) | map({k: (.[0].score % 10), n: length, s: (map(.score) | add)})'
    run -c 'sort_by(.name) | .[0:50] | map(.id)'
    run -r '.[] | [.id, .name, .score, (.tags | join(";"))] | @csv'
    run -r '.[] | select(.name | test("^user1[0-9]*7$")) | .name | ascii_upcase'
    run -c '[.[] | .name | sub("user(?<n>[0-9]+)"; "u-\(.n)")] | .[0:100]'
    run -c 'reduce .[] as $x ({}; .[$x.tags | length | tostring] += 1)'
    run -c '[paths] | length'
    run -c '[.[0:2000][] | tostream] | fromstream(.[])'
    run -c 'map(tojson | fromjson) | map(.geo.lat + .geo.lon) | add'
    run -S '.[0:500] | map(with_entries(.key |= ascii_upcase))'
    run -c 'walk(if type == "number" then . + 1 else . end) | .[-1]'
    run -c 'map(select(.active) | {id, t: (.tags | map(ltrimstr("t") | tonumber) | add)}) | unique_by(.t)'
    run -c '[limit(1000; .[] | .score)] | [min, max, (add / length | floor)]'
    run -c 'map(.name | split("r") | last | tonumber) | sort | .[-3:]'
    run -r '.[0:3000][] | "\(.id)\t\(.name)\t\(.score)" | @base64 | @base64d'
} | tr '\n' ' '
echo
