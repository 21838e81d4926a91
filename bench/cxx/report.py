#!/usr/bin/env python3
"""bench/cxx/report.py, two commands of bench/cxx/run.

`split`: the columns of one `sediment compare --json` run, one file per row
(cols/WORKLOAD/LABEL.json), each with the sha256 of the row's binary and of the default's, so
that a later run can keep rows it does not measure again and the report can tell whether they
are still comparable.

`listdiff OLD NEW`: the functions whose entries differ between two
`-fbasic-block-sections=list=` files (`!name`, then its `!!` cluster lines), sorted, one a
line (both names of a `!D2/D1` alias line): the objects defining them are the ones build 2
recompiles for a new list.

`report`: the `cxx` section of bench/RESULTS.md from the work directory (variants.txt,
cols/train/, cols/heldout/, steps/stat-LABEL.json, steps/times.tsv, steps/blocks-check.status).
One table per workload in the bench's format: each cell the value and its ratio to the default
link; pages and lines from the unshifted layout, iTLB and I1 the median over the shifted
layouts; the wall column (held-out table) the paired ratio of `sediment stat` with its 95%
interval. Replaces only the text between `<!-- BEGIN cxx -->` and `<!-- END cxx -->`."""
import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
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


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split(a):
    """One file per row of a compare (labels in the compare's order, the default first)."""
    cols = json.load(open(a.json, encoding="utf-8"))["shifted"]["columns"]
    if len(cols) != len(a.labels):
        raise SystemExit(f"report.py: {len(cols)} columns in {a.json}, expected {len(a.labels)}")
    base = sha256(os.path.join(a.work, "bin", "default"))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for label, col in zip(a.labels, cols):
        entry = {"label": label, "binary_sha256": sha256(os.path.join(a.work, "bin", label)),
                 "default_sha256": base, "measured": when, "column": col}
        write_atomic(os.path.join(a.dir, f"{label}.json"), json.dumps(entry, indent=1) + "\n")


def rows(work, workload, labels):
    """The rows of a workload from cols/WORKLOAD/; stops at a row measured on another binary
    or beside another default than the work directory's."""
    base = sha256(os.path.join(work, "bin", "default"))
    out, when = {}, {}
    for label in labels:
        path = os.path.join(work, "cols", workload, f"{label}.json")
        if not os.path.exists(path):
            raise SystemExit(f"report.py: {path}: no measurement of row {label} (run without VARIANTS)")
        entry = json.load(open(path, encoding="utf-8"))
        if entry["binary_sha256"] != sha256(os.path.join(work, "bin", label)):
            raise SystemExit(f"report.py: {path}: measured on another binary than bin/{label}: not comparable")
        if entry["default_sha256"] != base:
            raise SystemExit(f"report.py: {path}: measured beside another default link: not comparable")
        shifts = entry["column"]["per_shift"]
        out[label] = {f: (shifts[0][f] if how == "s0" else statistics.median_low(s[f] for s in shifts))
                      for f, _, how in METRICS}
        when[label] = entry["measured"]
    return out, when


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


def entries(path):
    """Per function of a list file, its cluster lines."""
    out, name = {}, None
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("!!"):
            out[name].append(line)
        elif line.startswith("!"):
            name = line[1:]
            out.setdefault(name, [])
    return out


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("listdiff")
    lp.add_argument("old")
    lp.add_argument("new")
    sp = sub.add_parser("split")
    for name in ("--json", "--dir", "--work"):
        sp.add_argument(name, required=True)
    sp.add_argument("labels", nargs="+")
    rp = sub.add_parser("report")
    for name in ("--work", "--results", "--elapsed", "--shifts", "--step", "--stat-runs", "--best",
                 "--pack", "--new", "--train", "--heldout"):
        rp.add_argument(name, required=True)
    a = p.parse_args()
    if a.cmd == "split":
        split(a)
        return
    if a.cmd == "listdiff":
        old, new = entries(a.old), entries(a.new)
        # A `!D2/D1` line names a function and its alias (docs/design/blocks.md): both names.
        changed = {x for n in old.keys() | new.keys() if old.get(n) != new.get(n) for x in n.split("/")}
        # `comm` in bench/cxx/run reads it: byte order, as `sort` in the C locale.
        sys.stdout.write("".join(n + "\n" for n in sorted(changed, key=lambda n: n.encode())))
        return
    w = a.work
    labels = open(os.path.join(w, "variants.txt"), encoding="utf-8").read().split()
    train, _ = rows(w, "train", labels)
    held, when = rows(w, "heldout", labels)
    new = [x for x in a.new.split(",") if x]
    kept = [x for x in labels if x not in new]
    stats = [wall(json.load(open(os.path.join(w, "steps", f"stat-{label}.json"), encoding="utf-8")))
             for label in labels]
    check = "not run"
    if os.path.exists(os.path.join(w, "steps", "blocks-check.status")):
        check = open(os.path.join(w, "steps", "blocks-check.status"), encoding="utf-8").read().strip()
    cpu = tool(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"])
    times = dict(line.split("\t") for line in open(os.path.join(w, "steps", "times.tsv"), encoding="utf-8").read().splitlines())
    shifts = int(a.shifts)
    out = ["<!-- BEGIN cxx -->", "## `cxx`: cppcheck 2.10 (C++, Debian's source package)", "",
           f"Command: `bench/cxx/run` (this run {a.elapsed}; "
           + ("the two clang builds took " + " and ".join(f"{times[k]} s" for k in ("build-labels", "build-list") if k in times)
              + " when last built in full" if "build-list" in times
              else f"build 1 took {times.get('build-labels', 'an untimed')} s when last built in full, build 2 was "
              "never built in one run")
           + "; both are reused when their flags and list file are unchanged"
           + (f"; build 2 last brought up to a new list file in {times['build-list-update']} s"
              if "build-list-update" in times else "") + "). "
           + (f"Rows measured in this run: {', '.join(f'`{x}`' for x in new)}; kept from an earlier run "
              f"on the same binaries and default link: {', '.join(f'`{x}` ({when[x]})' for x in kept)}. "
              if kept else "") +
           "Objects of the function-level variants: `clang++-16 -O2 -DNDEBUG -g1 -gdwarf-4 "
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
           "`bolt-full-nolbr` (bolt-full from `sediment export --format fdata`: `no_lbr` samples at the "
           "instruction addresses of the callgrind profile's per-instruction counts); `sediment-c3`" + (
               f"; `sediment-{a.best}` (Sediment's best function order: the algorithm `sediment order "
               "--compare --simulate` recommends from its replay of the training run)" if a.best != "c3" else
               " (also Sediment's best function order: the algorithm `sediment order --compare --simulate` "
               "recommends from its replay of the training run)") + "; `sediment-blocks` "
           "(`sediment blocks plan --hot-coverage 0.999` on the labels build, every translation unit "
           f"rebuilt with `-fbasic-block-sections=list=` and the packing flags `{a.pack}` that docs/guide/blocks.md "
           "recommends, as a user of the flow would (BOLT packs its own code; the flags change padding only, "
           "so the unpacked labels build gives the same blocks and plan), lld with the plan's order; "
           f"`sediment blocks check` on it: {check}).",
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
