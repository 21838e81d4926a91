#!/usr/bin/env python3
"""bench/cxx/report.py: the `cxx` section of bench/RESULTS.md from a bench/cxx/run work
directory (variants.txt, compare-train.json, compare-heldout.json, steps/stat-N.json,
steps/times.tsv, steps/order-compare.txt). One table per workload in the bench's format: each
cell the value and its ratio to the default link; pages and lines from the unshifted layout,
iTLB and I1 the median over the shifted layouts; the wall column (held-out table) the paired
ratio of `sediment stat` with its 95% interval. Replaces only the text between
`<!-- BEGIN cxx -->` and `<!-- END cxx -->`."""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile

# (field, title, how): s0 = the unshifted layout, median = median_low over the shifts.
METRICS = [
    ("instructions", "instructions", "s0"),
    ("itlb_misses_64", "iTLB miss 64 (median)", "median"),
    ("itlb_misses_128", "iTLB miss 128 (median)", "median"),
    ("pages_99", "4K pages 99%", "s0"),
    ("lines_99", "64B lines 99%", "s0"),
    ("i1_misses_32k_8way", "I1 miss 32K (median)", "median"),
]


def rows(path, labels, blocks_path):
    """The rows of a workload: the function-level variants from PATH, `sediment-blocks` (last
    label) from the second column of BLOCKS_PATH (a compare of the default and the block flow)."""
    cols = json.load(open(path, encoding="utf-8"))["shifted"]["columns"]
    if labels[-1] == "sediment-blocks":
        cols += json.load(open(blocks_path, encoding="utf-8"))["shifted"]["columns"][1:]
    if len(cols) != len(labels):
        raise SystemExit(f"report.py: {len(cols)} columns in {path}, expected {len(labels)}")
    out = {}
    for label, col in zip(labels, cols):
        shifts = col["per_shift"]
        out[label] = {f: (shifts[0][f] if how == "s0" else statistics.median_low(s[f] for s in shifts))
                      for f, _, how in METRICS}
    return out


def cell(x, base):
    return f"{x} ({x / base:.3f})" if base else f"{x} (-)"


def wall(stat):
    m = next(m for m in stat["metrics"] if m["metric"] == "wall_s")
    if m.get("paired_ratio") is None or m.get("paired_ratio_ci_low") is None:
        return "-", m
    return f"{m['paired_ratio']:.3f} [{m['paired_ratio_ci_low']:.3f}, {m['paired_ratio_ci_high']:.3f}]", m


def tool(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()[0].strip()
    except (OSError, IndexError):
        return "?"


def table(title, data, labels, stats=None):
    out = [title, ""]
    head = ["variant"] + [t for _, t, _ in METRICS]
    if stats:
        head.append("wall vs default [95% CI]")
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|" + "---:|" * (len(head) - 1))
    base = data[labels[0]]
    for i, label in enumerate(labels):
        r = data[label]
        cells = [label] + [cell(r[f], base[f]) for f, _, _ in METRICS]
        if stats:
            cells.append("1 (baseline)" if i == 0 else stats[i][0])
        out.append("| " + " | ".join(cells) + " |")
    if stats:
        out.append("| default (A/A) | " + " | ".join("" for _ in METRICS) + f" | {stats[0][0]} |")
    return out


def write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    for name in ("--work", "--results", "--elapsed", "--shifts", "--step", "--stat-runs", "--best",
                 "--train", "--heldout"):
        p.add_argument(name, required=True)
    a = p.parse_args()
    w = a.work
    labels = open(os.path.join(w, "variants.txt"), encoding="utf-8").read().split()
    train = rows(os.path.join(w, "compare-train.json"), labels, os.path.join(w, "compare-blocks-train.json"))
    held = rows(os.path.join(w, "compare-heldout.json"), labels, os.path.join(w, "compare-blocks-heldout.json"))
    stats = [wall(json.load(open(os.path.join(w, "steps", f"stat-{i}.json"), encoding="utf-8")))
             for i in range(len(labels))]
    cpu = tool(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"])
    times = dict(line.split("\t") for line in open(os.path.join(w, "steps", "times.tsv"), encoding="utf-8").read().splitlines())
    shifts = int(a.shifts)
    out = ["<!-- BEGIN cxx -->", "## `cxx`: cppcheck 2.10 (C++, Debian's source package)", "",
           f"Command: `bench/cxx/run` (whole run {a.elapsed}; the two clang builds "
           f"{times.get('build-labels', '?')} s and {times.get('build-list', '?')} s of it, reused when "
           "their flags and list file are unchanged). Objects: `clang++-16 -O2 -DNDEBUG -g1 -gdwarf-4 "
           "-ffunction-sections -fbasic-block-sections=labels` (71 objects: lib/ through the match "
           "compiler, cli/, externals/), every variant linked by lld. "
           f"Training workload: `{a.train}`; held-out workload: `{a.heldout}`.", "",
           f"- CPU: {cpu}, {os.cpu_count()} logical CPUs",
           f"- kernel: Linux {platform.release()}",
           f"- clang: {tool(['clang++-16', '--version'])}",
           f"- lld: {tool(['ld.lld', '--version'])}",
           f"- BOLT: {tool(['/usr/lib/llvm-16/bin/llvm-bolt', '--version'])[:60] or 'LLVM 16'} (package bolt-16)",
           f"- valgrind: {tool(['valgrind', '--version'])}", "",
           "Variants: `default` (lld, no order); `lld-c3` (lld's own C3 from `sediment export --format "
           "lld-call-graph` of the training profile); `bolt-functions` (BOLT 16 `-reorder-functions=hfsort+`, "
           "from BOLT's own instrumented training run; BOLT 16 has no cdsort); `bolt-full` (the same profile, "
           "`-reorder-blocks=ext-tsp -reorder-functions=hfsort+ -split-functions -split-all-cold`); "
           "`bolt-full-nolbr` (bolt-full from `sediment export --format fdata`, no_lbr samples of the "
           "callgrind profile); `sediment-c3`" + (
               f"; `sediment-{a.best}` (Sediment's best function order: the algorithm `sediment order "
               "--compare --simulate` recommends from its replay of the training run)" if a.best != "c3" else
               " (also Sediment's best function order: the algorithm `sediment order --compare --simulate` "
               "recommends from its replay of the training run)") + "; `sediment-blocks` "
           "(`sediment blocks plan --hot-coverage 0.999` on the labels build, the translation units "
           "defining a listed function rebuilt with `-fbasic-block-sections=list=`, lld with the plan's order).",
           "",
           f"Each cell: value, and in parentheses the ratio to `default`. Pages and lines are from the "
           f"unshifted layout; the iTLB and I1 columns are the median over {shifts} layouts (`sediment compare "
           f"--shifts {shifts} --shift-step {a.step}`: the code shifted by 0, {a.step}, ... bytes). The wall "
           f"column is `sediment stat -n {a.stat_runs}` of `default` against the variant on the held-out "
           "workload, interleaved (ABBA): the geometric mean of the per-pair ratios with the paired t-test's "
           "95% interval; the A/A row times the default against itself.", ""]
    out += table("Held-out workload (never trained):", held, labels, stats)
    out += [""]
    out += table("Training workload:", train, labels)
    out += ["", "<!-- END cxx -->", ""]
    section = "\n".join(out)
    text = open(a.results, encoding="utf-8").read()
    begin, end = "<!-- BEGIN cxx -->", "<!-- END cxx -->\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    write_atomic(a.results, text)


if __name__ == "__main__":
    main()
