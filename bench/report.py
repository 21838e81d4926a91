#!/usr/bin/env python3
"""Turns one bench/run work directory (compare.json, variants.txt, steps/times.tsv) into its
section of bench/RESULTS.md, between `<!-- BEGIN MODE -->` and `<!-- END MODE -->`, leaving the
other mode's section as it is. Only the standard library."""
import argparse
import json
import os
import platform
import statistics
import subprocess

METRICS = [  # (json field, column title, taken from)
    ("instructions", "instructions", "s0"),
    ("itlb_misses_64", "iTLB miss 64", "s0"),
    ("itlb_misses_128", "iTLB miss 128", "s0"),
    ("pages_99", "4K pages 99%", "s0"),
    ("pages_99_9", "4K pages 99.9%", "s0"),
    ("lines_99", "64B lines 99%", "s0"),
    ("lines_99_9", "64B lines 99.9%", "s0"),
    ("i1_misses_32k_8way", "I1 miss 32K (median)", "median"),
    ("i1_misses_16k_4way", "I1 miss 16K (median)", "median"),
]


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return "(not found)"


def machine():
    model = "(unknown)"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return [
        ("CPU", f"{model}, {os.cpu_count()} logical CPUs (nproc)"),
        ("kernel", f"{platform.system()} {platform.release()}"),
        ("gcc", first_line(["gcc", "--version"])),
        ("GNU ld", first_line(["ld.bfd", "--version"])),
        ("lld", first_line(["ld.lld", "--version"])),
        ("valgrind", first_line(["valgrind", "--version"])),
    ]


def main():
    ap = argparse.ArgumentParser()
    for a in ("mode", "program", "shifts", "step", "train", "test", "elapsed", "work", "results"):
        ap.add_argument("--" + a, required=True)
    a = ap.parse_args()
    shifts = int(a.shifts)
    with open(os.path.join(a.work, "compare.json"), encoding="utf-8") as f:
        cols = [c["metrics"] for c in json.load(f)["columns"]]
    with open(os.path.join(a.work, "variants.txt"), encoding="utf-8") as f:
        variants = [line.strip() for line in f if line.strip()]
    if len(cols) != len(variants) * shifts:
        raise SystemExit(f"report.py: {len(cols)} measured binaries, expected {len(variants) * shifts}")
    rows = {}
    for i, v in enumerate(variants):
        group = cols[i * shifts:(i + 1) * shifts]
        row = {}
        for field, _, how in METRICS:
            vals = [g[field] for g in group]
            # median_low: an odd count gives the middle one; an even count the lower middle, a measured value.
            row[field] = vals[0] if how == "s0" else statistics.median_low(vals)
            row[field + "_range"] = (min(vals), max(vals))
        rows[v] = row
    base = rows[variants[0]]

    out = [f"<!-- BEGIN {a.mode} -->", f"## `bench/run --{a.mode}`: {a.program}", ""]
    out.append(f"Command: `bench/run --{a.mode}` (whole run {a.elapsed} s). "
               f"Training workload: `{a.train or '(no arguments)'}`; measured workload: "
               f"`{a.test or '(no arguments)'}`, all variants in one `sediment compare --json`.")
    out.append("")
    out += [f"- {k}: {v}" for k, v in machine()]
    out.append("")
    out.append(f"Each cell: value, and in parentheses the ratio to `{variants[0]}`. "
               f"iTLB, pages and lines are from the unshifted link; the I1 columns are the median over "
               f"{shifts} layouts with the code shifted by 0, {a.step}, ... bytes (a pad placed first).")
    out.append("")
    out.append("| variant | " + " | ".join(t for _, t, _ in METRICS) + " |")
    out.append("|---|" + "---:|" * len(METRICS))
    for v in variants:
        cells = []
        for field, _, _ in METRICS:
            x, b = rows[v][field], base[field]
            ratio = f"{x / b:.3f}" if b else "-"
            cells.append(f"{x} ({ratio})")
        out.append(f"| {v} | " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"Spread of the I1 misses over the {shifts} shifted layouts (min-max), "
               "to read the medians against:")
    out.append("")
    out.append("| variant | I1 32K min-max | I1 16K min-max |")
    out.append("|---|---:|---:|")
    for v in variants:
        r32 = rows[v]["i1_misses_32k_8way_range"]
        r16 = rows[v]["i1_misses_16k_4way_range"]
        out.append(f"| {v} | {r32[0]}-{r32[1]} | {r16[0]}-{r16[1]} |")
    out.append("")
    out.append("Optimization and link steps (`/usr/bin/time -f '%e %M'`: wall seconds, peak RSS KiB). "
               "`order-X` is `sediment order --algorithm X`, `link-X` is `sediment link --linker lld` "
               "for it; `link-lld-c3` is the whole lld link with `--call-graph-ordering-file` "
               "(compare with `link-default-lld`); `record` is the callgrind training run.")
    out.append("")
    out.append("| step | seconds | peak RSS (KiB) |")
    out.append("|---|---:|---:|")
    with open(os.path.join(a.work, "steps", "times.tsv"), encoding="utf-8") as f:
        for line in f:
            name, rest = line.rstrip("\n").split("\t", 1)
            parts = rest.split()
            if len(parts) == 2:
                out.append(f"| {name} | {parts[0]} | {parts[1]} |")
            else:
                out.append(f"| {name} | {rest} | |")
    out.append(f"<!-- END {a.mode} -->")
    section = "\n".join(out) + "\n"

    header = ("# Benchmark results\n\nWritten by `bench/run` (see `bench/README.md`); each mode "
              "replaces only its own section.\n\n")
    text = open(a.results, encoding="utf-8").read() if os.path.exists(a.results) else header
    begin, end = f"<!-- BEGIN {a.mode} -->", f"<!-- END {a.mode} -->\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    tmp = a.results + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, a.results)


if __name__ == "__main__":
    main()
