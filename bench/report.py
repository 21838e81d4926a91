#!/usr/bin/env python3
"""Turns one bench/run work directory into its section of bench/RESULTS.md and its charts.

Reads compare.json (every variant at every layout), compare-heldout.json (first layout of every
variant on the held-out workload, when there is one), variants.txt ("label layouts" per line, in
the order of compare.json's columns), steps/stat-V.json (`sediment stat --json` of default-bfd
against variant V), sim-phases.json and sim-phases-heldout.json (step 5c: every function order at
the sixteen iTLB page phases of the measured and the held-out workload, when there are) and
steps/times.tsv. With --throughput (postgres), the stat runs are a fixed
number of `pgbench` transactions against a server of each binary, and the tables show the
throughput ratio instead of wall and CPU time (see throughput_cell). Writes the section between `<!-- BEGIN SECTION -->` and
`<!-- END SECTION -->`, leaving the other sections as they are, and one SVG bar chart per metric,
bench/charts/SECTION-METRIC.svg, of each variant's ratio to the first variant (default-bfd).
Only the standard library; the SVG is written by hand so that the same numbers give the same
bytes."""
import argparse
import json
import os
import platform
import statistics
import subprocess

METRICS = [  # (json field, column title, taken from, chart file stem)
    ("instructions", "instructions", "s0", "instructions"),
    ("itlb_misses_64", "iTLB miss 64 (median)", "median", "itlb64"),
    ("itlb_misses_128", "iTLB miss 128 (median)", "median", "itlb128"),
    ("pages_99", "4K pages 99%", "s0", "pages99"),
    ("pages_99_9", "4K pages 99.9%", "s0", "pages999"),
    ("lines_99", "64B lines 99%", "s0", "lines99"),
    ("lines_99_9", "64B lines 99.9%", "s0", "lines999"),
    ("i1_misses_32k_8way", "I1 miss 32K (median)", "median", "i1-32k"),
    ("i1_misses_16k_4way", "I1 miss 16K (median)", "median", "i1-16k"),
]
HELDOUT_METRICS = ["instructions", "itlb_misses_64", "itlb_misses_128", "pages_99", "lines_99",
                   "i1_misses_32k_8way", "i1_misses_16k_4way"]
STAT_METRICS = [("wall_s", "wall time"), ("cpu_s", "CPU time")]

STEP_NOTES = ("`record` is the callgrind training run that every Sediment variant and `lld-c3` "
              "share; `order-X` is `sediment order --algorithm X` and `link-X` is "
              "`sediment link --linker lld` (writing lld's ordering file) for it, `link-c3-gold` "
              "and `link-c3-bfd` the same order's `sediment link --linker gold` (a section "
              "ordering file) and `--linker bfd` (a linker script); `link-lld-c3` is "
              "the whole lld link with `--call-graph-ordering-file` (compare with "
              "`link-default-lld`: the difference is lld's C3); `bolt-instrument` is "
              "`llvm-bolt -instrument`, `bolt-train` the instrumented training run, "
              "`bolt-functions` and `bolt-full` the two optimizing `llvm-bolt` runs; "
              "`clang-X` is the clang-16 compile for the block-level flow's build X (default, "
              "labels, list; absent when cached; SQLite: sqlite3.c, not speedtest1.c; Lua: every "
              "source file; PostgreSQL: `make` of the backend in a configured tree of its own), "
              "`blocks-record` its callgrind "
              "training run with jumps on the labels build, `blocks-plan` is `sediment blocks "
              "plan` and `link-blocks` its `sediment link`; the `pgo-` steps are the same for "
              "the block flow on a sample-PGO build (`pgo-record` trains the profiled build, "
              "`pgo-unsym` is `sediment pgo`, `pgo-profgen` is `llvm-profgen`, `clang-pgo-X` "
              "its compiles with the sample profile); "
              "`compare`, `compare-heldout`, `compare-train` are the measurements, not tools.")


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
        ("BOLT", first_line(["/usr/lib/llvm-16/bin/llvm-bolt", "--version"])
         + " (`/usr/lib/llvm-16/bin/llvm-bolt`, package bolt-16)"),
        ("valgrind", first_line(["valgrind", "--version"])),
    ]


def read_measured(work, variants_file, compare_file, count=None):
    """The variants of VARIANTS_FILE ("label layouts" per line) and the metric columns of
    COMPARE_FILE (`sediment compare --json`), checked to be COUNT columns (default: every layout
    of every variant)."""
    with open(os.path.join(work, variants_file), encoding="utf-8") as f:
        variants = [(line.split()[0], int(line.split()[1])) for line in f if line.strip()]
    path = os.path.join(work, compare_file)
    with open(path, encoding="utf-8") as f:
        cols = [c["metrics"] for c in json.load(f)["columns"]]
    want = sum(n for _, n in variants) if count is None else count
    if len(cols) != want:
        raise SystemExit(f"report.py: {len(cols)} measured binaries in {path}, expected {want}")
    return variants, cols


def group_rows(variants, cols):
    """One row per variant from a compare's columns (its layouts in order): the first layout's
    value or the median over the layouts, per METRICS, and each metric's range."""
    rows, i = {}, 0
    for v, n in variants:
        group = cols[i:i + n]
        i += n
        row = {}
        for field, _, how, _ in METRICS:
            vals = [g[field] for g in group]
            # median_low: an odd count gives the middle one; an even count the lower middle, a measured value.
            row[field] = vals[0] if how == "s0" else statistics.median_low(vals)
            row[field + "_range"] = (min(vals), max(vals))
        rows[v] = row
    return rows


def ratio(x, b):
    return f"{x / b:.3f}" if b else "-"


def ci_cell(m):
    """`ratio [low, high]` of one `sediment stat` metric; `-` where the ratio is undefined."""
    if m["ratio"] is None or m["ratio_ci_low"] is None:
        return "-"
    return f"{m['ratio']:.3f} [{m['ratio_ci_low']:.3f}, {m['ratio_ci_high']:.3f}]"


def pair_ratio(m):
    """(ratio, (low, high)) of one `sediment stat` metric's paired view (the geometric mean of
    the per-pair ratios, run i of A beside run i of B, with the paired t-test's interval), or of
    the means from a stat that predates it."""
    if m.get("paired_ratio") is None or m.get("paired_ratio_ci_low") is None:
        return m["ratio"], (m["ratio_ci_low"], m["ratio_ci_high"])
    return m["paired_ratio"], (m["paired_ratio_ci_low"], m["paired_ratio_ci_high"])


def pair_cell(m):
    """`ratio [low, high]` of [pair_ratio]; `-` where the ratio is undefined."""
    r, (lo, hi) = pair_ratio(m)
    if r is None or lo is None:
        return "-"
    return f"{r:.3f} [{lo:.3f}, {hi:.3f}]"


def throughput_cell(m):
    """`ratio [low, high]` of throughput variant/default from a `sediment stat` wall-time metric
    of a fixed transaction count: TPS_B / TPS_A = mean_a / mean_b, the inverse of stat's ratio
    of means B/A. Its interval is the inverse of stat's too, ends swapped: stat's interval is
    symmetric in the log-ratio (delta method), so 1/x maps it onto the interval of the inverse."""
    if m["ratio"] is None or m["ratio_ci_low"] is None:
        return "-"
    return f"{1 / m['ratio']:.3f} [{1 / m['ratio_ci_high']:.3f}, {1 / m['ratio_ci_low']:.3f}]"


def throughput_median_cell(m):
    """The same from the medians: median_a / median_b, with stat's seeded percentile-bootstrap
    interval of the ratio of medians inverted (1/x of every bootstrap replicate reverses their
    order, so the percentiles map exactly). Robust to the few very slow runs a shared machine
    gives, which move the means."""
    if m["median_ratio"] is None or m["median_ratio_ci_low"] is None:
        return "-"
    return (f"{1 / m['median_ratio']:.3f} [{1 / m['median_ratio_ci_high']:.3f}, "
            f"{1 / m['median_ratio_ci_low']:.3f}]")


def transactions(command):
    """The transaction count of a `pgbench ... -t N` command."""
    words = command.split()
    if "-t" not in words or words.index("-t") + 1 >= len(words):
        raise SystemExit(f"report.py: --throughput '{command}' has no `-t N`")
    return int(words[words.index("-t") + 1])


def tool_summary(steps, names):
    """Per tool, the cost of getting a profile and of the optimization itself, from the step
    times: Sediment = `order` + `link` (its lld link of the ordering file is the same link as
    default-lld's and is left out), lld's C3 = its whole link less the default lld link, BOLT =
    `instrument` + the instrumented training run, then one `llvm-bolt` run."""
    rows = []
    rec = steps.get("record")
    for v in names:
        if v == "sediment-blocks" and "blocks-record" in steps and "blocks-plan" in steps:
            # Its own profile (the clang labels build) and a second compile with the clusters.
            parts = [steps[s] for s in ("blocks-plan", "clang-list", "link-blocks") if s in steps]
            rows.append((v, "callgrind with jumps (labels build)", steps["blocks-record"],
                         "`blocks plan` + list compile + `link`",
                         (sum(p[0] for p in parts), max(p[1] for p in parts))))
        elif v == "sediment-pgo-blocks" and "pgo-record" in steps and "pgo-blocks-record" in steps:
            # Two trainings (the profiled build, then its PGO labels build) and two compiles with
            # the sample profile (labels, list) on top of the profile conversion and the plan.
            prof = [steps[s] for s in ("pgo-record", "pgo-blocks-record")]
            opt = [steps[s] for s in ("pgo-unsym", "pgo-profgen", "clang-pgo-labels",
                                      "pgo-blocks-plan", "clang-pgo-list", "link-pgo-blocks")
                   if s in steps]
            rows.append((v, "callgrind with jumps (profiled build, then its PGO labels build)",
                         (sum(p[0] for p in prof), max(p[1] for p in prof)),
                         "`pgo` + `llvm-profgen` + PGO compiles + `blocks plan` + `link`",
                         (sum(p[0] for p in opt), max(p[1] for p in opt))))
        elif v.startswith("sediment-"):
            a = v[len("sediment-"):]
            # sediment-c3-gold: the order of sediment-c3, its own `sediment link` (link-c3-gold).
            algo = a.rsplit("-", 1)[0] if a.endswith(("-gold", "-bfd")) else a
            o, l = steps.get(f"order-{algo}"), steps.get(f"link-{a}")
            if o and l:
                rows.append((v, "callgrind `record`", rec, "`order` + `link`",
                             (o[0] + l[0], max(o[1], l[1]))))
        elif v == "lld-c3" and "link-lld-c3" in steps and "link-default-lld" in steps:
            c, d = steps["link-lld-c3"], steps["link-default-lld"]
            rows.append((v, "callgrind `record`", rec, "C3 link less default lld link",
                         (max(c[0] - d[0], 0.0), c[1])))
        elif v.startswith("bolt-") and v in steps and "bolt-instrument" in steps:
            i, t = steps["bolt-instrument"], steps.get("bolt-train", (0.0, 0))
            rows.append((v, "`llvm-bolt -instrument` + run", (i[0] + t[0], max(i[1], t[1])),
                         "`llvm-bolt`", steps[v]))
    if not rows:
        return []
    out = ["Cost of each tool's steps (wall seconds and peak RSS; the profile step is shared by "
           "every variant that uses it; a simulated profile (callgrind) is much slower than "
           "`perf record` would be, and BOLT's instrumented run is a native run):", "",
           "| variant | profile step | s | peak KiB | optimization step | s | peak KiB |",
           "|---|---|---:|---:|---|---:|---:|"]
    for v, pn, p, on, o in rows:
        ps = f"{p[0]:.2f} | {p[1]}" if p else "- | -"
        out.append(f"| {v} | {pn} | {ps} | {on} | {o[0]:.2f} | {o[1]} |")
    out.append("")
    return out


def order_check(path):
    """The table of steps/order-check.tsv: per ordered variant, whether its unshifted binary
    has the order's functions in the order's sequence (bench/run's check_order)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    if not rows:
        return []
    out = ["Order carried (`nm -n` of each ordered variant's unshifted binary against the ordering "
           "it was given, as lld's symbol list: of the listed names that name one function in the "
           "binary, the consecutive pairs placed at ascending addresses; `sediment-c3-gold` and "
           "`sediment-c3-bfd` are read against `sediment-c3`'s list):", "",
           "| variant | names listed | found once in the binary | pairs ascending |",
           "|---|---:|---:|---:|"]
    for name, listed, found, up, pairs in rows:
        share = f" ({int(up) / int(pairs):.1%})" if int(pairs) else ""
        out.append(f"| {name} | {listed} | {found} | {up} of {pairs}{share} |")
    out.append("")
    return out


def phase_table(path, step, workload, against):
    """Step 5c's tables: every function order's iTLB and I1 32K misses over the 16 page phases
    of one workload; `against` says which one-phase table above it reads against."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        cols = json.load(f)["columns"]
    keys = ("itlb_misses_64", "itlb_misses_128", "i1_misses_32k_8way")
    base = cols[0]["metrics"]
    out = [f"Every function order at all sixteen page phases of the iTLBs (step 5c: one `sediment "
           f"sim --shifts 16 --shift-step {step}` of `{workload}` on the default lld link, each "
           "order replayed as lld places it; median [min-max] over the sixteen layouts, ratio to "
           f"the default link's median). {against}:",
           "", "| layout | iTLB miss 64 | iTLB miss 128 | I1 miss 32K |", "|---|---:|---:|---:|"]
    for c in cols:
        label = c["label"].split("@", 1)[1].removesuffix(".order") if "@" in c["label"] \
            else "default-lld as linked"
        cells = []
        for k in keys:
            m, lo, hi = c["metrics"][k], c.get("min", {}).get(k), c.get("max", {}).get(k)
            spread = f" [{lo}-{hi}]" if lo is not None and lo != hi else ""
            cells.append(f"{m}{spread} ({ratio(m, base[k])})")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    return out


# --- SVG ------------------------------------------------------------------------------------------
def svg_chart(title, labels, ratios, cis=None, better="shorter"):
    """A horizontal bar chart of ratios to the baseline, a line at 1.0, optional [low, high]
    whiskers. Fixed geometry and 3-decimal text, so equal inputs give equal bytes. `better`
    says which way is good ("longer" for a throughput): it sets the subtitle and the colours."""
    left, width, bar, gap, top = 190, 420, 18, 6, 46
    # The scale follows the bars, not the whiskers: one very wide interval (a noisy wall time)
    # would squash every bar; whiskers past the edge are cut there and drawn without an end cap.
    xmax = max([r for r in ratios if r is not None] + [1.0]) * 1.25
    height = top + len(labels) * (bar + gap) + 30

    def x(v):
        return left + width * v / xmax

    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 80}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{esc(title)}</text>',
           f'<text x="10" y="36" fill="#555">ratio to {esc(labels[0])} ({better} is better'
           + ('; blue-grey: the 95% interval contains 1' if cis else '') + ')</text>']
    for i, (lab, r) in enumerate(zip(labels, ratios)):
        y = top + i * (bar + gap)
        out.append(f'<text x="{left - 6}" y="{y + bar - 5}" text-anchor="end">{esc(lab)}</text>')
        if r is None:
            out.append(f'<text x="{left + 4}" y="{y + bar - 5}" fill="#555">n/a</text>')
            continue
        good = r < 1 if better == "shorter" else r > 1
        colour = "#888" if i == 0 else ("#2a7" if good else "#c44")
        if i > 0 and cis and cis[i] and None not in cis[i] and cis[i][0] <= 1 <= cis[i][1]:
            colour = "#9ab"  # the interval contains 1: no difference shown
        out.append(f'<rect x="{left}" y="{y}" width="{x(r) - left:.1f}" height="{bar}" fill="{colour}"/>')
        end = x(r)
        if cis and cis[i] and None not in cis[i]:
            lo, hi = cis[i]
            cut = hi > xmax
            hi = min(hi, xmax)
            cy = y + bar / 2
            out.append(f'<line x1="{x(lo):.1f}" y1="{cy}" x2="{x(hi):.1f}" y2="{cy}" stroke="black"/>')
            out.append(f'<line x1="{x(lo):.1f}" y1="{y + 3}" x2="{x(lo):.1f}" y2="{y + bar - 3}" stroke="black"/>')
            if not cut:
                out.append(f'<line x1="{x(hi):.1f}" y1="{y + 3}" x2="{x(hi):.1f}" y2="{y + bar - 3}" stroke="black"/>')
            end = max(end, x(hi))
        out.append(f'<text x="{end + 4:.1f}" y="{y + bar - 5}">{r:.3f}</text>')
    one = x(1.0)
    out.append(f'<line x1="{one:.1f}" y1="{top - 4}" x2="{one:.1f}" y2="{height - 26}" '
               f'stroke="black" stroke-dasharray="4,3"/>')
    out.append(f'<text x="{one:.1f}" y="{height - 12}" text-anchor="middle">1.0</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    for a in ("mode", "section", "program", "train", "test", "heldout", "stat-runs",
              "elapsed", "work", "results", "charts"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--step", required=True, type=int)
    ap.add_argument("--command", default=None)
    ap.add_argument("--timed", default="",
                    help="the workload arguments `sediment stat` timed, when not the measured ones")
    ap.add_argument("--throughput", default="",
                    help="the pgbench command timed per variant (postgres); empty: wall and CPU time")
    a = ap.parse_args()
    work = a.work
    here = os.path.dirname(os.path.abspath(__file__))
    show = lambda s: s.replace(here + "/", "bench/")  # argument paths as the repository spells them

    variants, cols = read_measured(work, "variants.txt", "compare.json")
    names = [v for v, _ in variants]
    rows = group_rows(variants, cols)
    layouts = dict(variants)
    shifts = max(layouts.values())
    base = rows[names[0]]

    stats = {}
    for k, v in enumerate(names[1:], start=1):
        p = os.path.join(work, "steps", f"stat-{k}.json")
        with open(p, encoding="utf-8") as f:
            stats[v] = {m["metric"]: m for m in json.load(f)["metrics"]}

    heldout = None
    if a.heldout and os.path.exists(os.path.join(work, "compare-heldout.json")):
        _, hcols = read_measured(work, "variants.txt", "compare-heldout.json", len(names))
        heldout = dict(zip(names, hcols))

    sec = a.section
    command = a.command or ("bench/run --quick" if a.mode == "quick" else f"bench/run --full --program {sec}")
    chart_dir = a.charts
    os.makedirs(chart_dir, exist_ok=True)
    charts = []

    out = [f"<!-- BEGIN {sec} -->", f"## `{sec}`: {a.program}", ""]
    out.append(f"Command: `{command}` (whole run {a.elapsed} s). Training workload: "
               f"`{show(a.train) or '(no arguments)'}`; measured workload: "
               f"`{show(a.test) or '(no arguments)'}`"
               + (f"; held-out workload: `{show(a.heldout)}`" if a.heldout else "")
               + ". All variants measured in one `sediment compare --json` per workload.")
    out.append("")
    out += [f"- {k}: {v}" for k, v in machine()]
    out.append("")
    tput = a.throughput
    if tput:
        last = (f" The TPS column is `sediment stat -n {a.stat_runs}` of `{tput}` against a server "
                f"of `{names[0]}` and one of the variant, both running on 127.0.0.1 (fresh copies of "
                "one data directory), interleaved (ABBA) after one warm-up each: throughput of the "
                "variant over the default's, which is the default's mean wall time over the "
                "variant's (the transaction count is fixed), with the 95% confidence interval of "
                "stat's ratio inverted (it is symmetric in the log-ratio); above 1 is faster, an "
                "interval that contains 1 shows no difference.")
    else:
        last = (" The wall and CPU "
                f"columns are `sediment stat -n {a.stat_runs}` of `{names[0]}` against the variant, "
                "interleaved (ABBA), on "
                + (f"`{show(a.timed)}` (a longer run of the same program than the measured workload)"
                   if a.timed and a.timed != a.test else "the measured workload")
                + ": the geometric mean of the per-pair ratios (run i of the default beside run i "
                "of the variant, so the machine's drift cancels) with the paired t-test's 95% "
                "confidence interval (an interval that contains 1 shows no difference).")
    out.append(f"Each cell: value, and in parentheses the ratio to `{names[0]}`. Pages and "
               f"lines are from the unshifted link; " + (
                   f"the iTLB and I1 columns are the median over {shifts} layouts with the code "
                   f"shifted by 0, {a.step}, ... bytes (a pad placed first)" + (
                       f", each shift one 4 KiB page and {a.step % 4096} bytes: the code's lines "
                       "fall in other L1i sets and its pages in other iTLB sets (valgrind loads "
                       "the program and its libraries at fixed addresses, so one layout's iTLB "
                       "set conflicts with libc are one draw of what address randomization "
                       "varies from run to run)" if a.step > 4096 else "") +
                   ", except for the BOLT variants, "
                   "measured at their one layout (BOLT places its output code at a 2 MiB-aligned "
                   "address whatever the input's layout)." if shifts > 1 else
                   "this run had SHIFTS=1, so the iTLB and I1 columns are from one layout too (no "
                   "median: read them with the spread of the quick mode's shifted layouts in "
                   "mind).") + last)
    out.append("")
    stat_titles = (["TPS vs default [95% CI]"] if tput else
                   ["wall vs default [95% CI]", "CPU vs default [95% CI]"])
    out.append("| variant | " + " | ".join(t for _, t, _, _ in METRICS) + " | "
               + " | ".join(stat_titles) + " |")
    out.append("|---|" + "---:|" * (len(METRICS) + len(stat_titles)))
    for v in names:
        cells = [f"{rows[v][f]} ({ratio(rows[v][f], base[f])})" for f, _, _, _ in METRICS]
        if tput:
            cells.append(throughput_cell(stats[v]["wall_s"]) if v in stats else "1 (baseline)")
        for m, _ in ([] if tput else STAT_METRICS):
            cells.append(pair_cell(stats[v][m]) if v in stats else "1 (baseline)")
        lab = v if layouts[v] == shifts else f"{v} ({layouts[v]} layout)"
        out.append(f"| {lab} | " + " | ".join(cells) + " |")
    out.append("")

    # charts of the main table
    for f, title, _, stem in METRICS:
        rs = [rows[v][f] / base[f] if base[f] else None for v in names]
        charts.append((f"{sec}-{stem}.svg", svg_chart(f"{sec}: {title}", names, rs)))
    if tput:
        inv = lambda x: None if x is None else 1 / x
        rs = [1.0] + [inv(stats[v]["wall_s"]["ratio"]) for v in names[1:]]
        cis = [None] + [(inv(stats[v]["wall_s"]["ratio_ci_high"]), inv(stats[v]["wall_s"]["ratio_ci_low"]))
                        for v in names[1:]]
        charts.append((f"{sec}-tps.svg", svg_chart(f"{sec}: pgbench -S throughput, ratio, 95% CI",
                                                   names, rs, cis, better="longer")))
    for m, title in ([] if tput else STAT_METRICS):
        pairs = [pair_ratio(stats[v][m]) for v in names[1:]]
        rs = [1.0] + [r for r, _ in pairs]
        cis = [None] + [ci for _, ci in pairs]
        charts.append((f"{sec}-{m.replace('_s', '')}.svg",
                       svg_chart(f"{sec}: {title}, paired ratio, 95% CI", names, rs, cis)))

    fmt_p = lambda m: "-" if m["p_value"] is None else f"{m['p_value']:.2g}"
    fmt_pp = lambda m: "-" if m.get("paired_p") is None else f"{m['paired_p']:.2g}"
    if tput:
        tx = transactions(tput)
        out.append(f"Throughput in detail (`sediment stat -n {a.stat_runs} --json` of `{tput}`, one "
                   f"pair of servers per row; TPS = {tx} transactions over the median wall time of "
                   "a run, connection included; A is the default server, B the variant's; TPS B/A "
                   "is from the means as in the table above, and again from the medians with "
                   "stat's bootstrap interval, which a few very slow runs do not move; p is "
                   "Welch's t-test on the wall times; the client's CPU time is not shown, as it "
                   "says nothing about the server. The A/A row, when there is one, runs the default "
                   "on both servers: how far from 1 the setup alone puts a ratio):")
        out.append("")
        out.append("| variant | TPS median A / B | TPS B/A, means [95% CI] | TPS B/A, medians [95% CI] "
                   "| wall B/A [95% CI] | p |")
        out.append("|---|---:|---:|---:|---:|---:|")
        rows_t = [(v, stats[v]["wall_s"]) for v in names[1:]]
        aa = os.path.join(work, "steps", "stat-aa.json")
        if os.path.exists(aa):
            with open(aa, encoding="utf-8") as f:
                aa_wall = {m["metric"]: m for m in json.load(f)["metrics"]}["wall_s"]
            rows_t.insert(0, (f"{names[0]} against itself (A/A control)", aa_wall))
        for v, w in rows_t:
            out.append(f"| {v} | {tx / w['median_a']:.0f} / {tx / w['median_b']:.0f} | "
                       f"{throughput_cell(w)} | {throughput_median_cell(w)} | {ci_cell(w)} | {fmt_p(w)} |")
    else:
        out.append(f"Wall and CPU time in detail (`sediment stat -n {a.stat_runs} --json`, one pair of "
                   "commands per row; CPU time is user+system from `wait4`, usually the steadier of "
                   "the two on a shared machine; *means*: ratio of means with its delta-method "
                   "interval and Welch's t-test, which count the machine's drift as noise on both "
                   "sides; *pairs*: the paired view of the table above and its paired t-test):")
        out.append("")
        out.append("| variant | wall median A / B (s) | wall B/A means [95% CI] | p | wall B/A pairs [95% CI] "
                   "| p | CPU B/A means [95% CI] | p | CPU B/A pairs [95% CI] | p |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for v in names[1:]:
            w, c = stats[v]["wall_s"], stats[v]["cpu_s"]
            out.append(f"| {v} | {w['median_a']:.4f} / {w['median_b']:.4f} | {ci_cell(w)} | {fmt_p(w)} "
                       f"| {pair_cell(w)} | {fmt_pp(w)} | {ci_cell(c)} | {fmt_p(c)} "
                       f"| {pair_cell(c)} | {fmt_pp(c)} |")
    out.append("")

    titles = {f: t for f, t, _, _ in METRICS}
    if heldout:
        hb = heldout[names[0]]
        out.append(f"Held-out workload `{show(a.heldout)}` (not in the training run), first layout "
                   "of every variant, one `sediment compare --json`:")
        out.append("")
        out.append("| variant | " + " | ".join(titles[f].replace(" (median)", "") for f in HELDOUT_METRICS) + " |")
        out.append("|---|" + "---:|" * len(HELDOUT_METRICS))
        for v in names:
            out.append(f"| {v} | " + " | ".join(
                f"{heldout[v][f]} ({ratio(heldout[v][f], hb[f])})" for f in HELDOUT_METRICS) + " |")
        out.append("")
        for f, stem in (("itlb_misses_64", "itlb64"), ("i1_misses_32k_8way", "i1-32k"),
                        ("i1_misses_16k_4way", "i1-16k")):
            rs = [heldout[v][f] / hb[f] if hb[f] else None for v in names]
            charts.append((f"{sec}-heldout-{stem}.svg",
                           svg_chart(f"{sec}, held-out: {titles[f].replace(' (median)', '')}",
                                     names, rs)))

    out += phase_table(os.path.join(work, "sim-phases.json"), a.step, show(a.test),
                       "The relinked columns above see only the first SHIFTS phases")
    if a.heldout:
        out += phase_table(os.path.join(work, "sim-phases-heldout.json"), a.step, show(a.heldout),
                           "The held-out table above sees the first phase only")

    if os.path.exists(os.path.join(work, "compare-train.json")):
        tvariants, tcols = read_measured(work, "compare-train.txt", "compare-train.json")
        trows = group_rows(tvariants, tcols)
        tb = trows[tvariants[0][0]]
        out.append(f"The training workload itself `{show(a.train)}`, for the variants the program "
                   "names (ACCEPT in bench/run), every layout, one `sediment compare --json`; "
                   "cells as in the first table, the iTLB and I1 columns with their min-max:")
        out.append("")
        out.append("| variant | layouts | " + " | ".join(t for _, t, _, _ in METRICS) + " |")
        out.append("|---|---:|" + "---:|" * len(METRICS))
        for v, n in tvariants:
            cells = []
            for field, _, how, _ in METRICS:
                cell = f"{trows[v][field]} ({ratio(trows[v][field], tb[field])})"
                lo, hi = trows[v][field + "_range"]
                if how == "median" and n > 1:
                    cell += f" {lo}-{hi}"
                cells.append(cell)
            out.append(f"| {v} | {n} | " + " | ".join(cells) + " |")
        out.append("")

    if shifts > 1:
        spread = ["itlb_misses_64", "i1_misses_32k_8way", "i1_misses_16k_4way"]
        out.append("Spread of the misses over the shifted layouts (min-max), to read the medians against:")
        out.append("")
        out.append("| variant | layouts | " + " | ".join(
            titles[f].replace(" (median)", " min-max") for f in spread) + " |")
        out.append("|---|---:|" + "---:|" * len(spread))
        for v in names:
            cells = [f"{lo}-{hi}" for lo, hi in (rows[v][f + "_range"] for f in spread)]
            out.append(f"| {v} | {layouts[v]} | " + " | ".join(cells) + " |")
        out.append("")
    steps, step_rows = {}, []
    with open(os.path.join(work, "steps", "times.tsv"), encoding="utf-8") as f:
        for line in f:
            name, rest = line.rstrip("\n").split("\t", 1)
            parts = rest.split()
            if len(parts) == 2:
                steps[name] = (float(parts[0]), int(parts[1]))
                step_rows.append(f"| {name} | {parts[0]} | {parts[1]} |")
            else:
                step_rows.append(f"| {name} | {rest} | |")
    out += order_check(os.path.join(work, "steps", "order-check.tsv"))
    out += tool_summary(steps, names)
    out.append("Every step (`/usr/bin/time -f '%e %M'`: wall seconds, peak RSS KiB). " + STEP_NOTES)
    out.append("")
    out.append("| step | seconds | peak RSS (KiB) |")
    out.append("|---|---:|---:|")
    out += step_rows
    out.append("")
    out.append("Charts (ratio to `default-bfd` per variant): "
               + ", ".join(f"[{n[len(sec) + 1:-4]}](charts/{n})" for n, _ in charts) + ".")
    out.append(f"<!-- END {sec} -->")
    section = "\n".join(out) + "\n"

    for n, text in charts:
        write_atomic(os.path.join(chart_dir, n), text)
    header = ("# Benchmark results\n\nWritten by `bench/run` (see `bench/README.md`); each run "
              "replaces only its own section.\n\n")
    text = open(a.results, encoding="utf-8").read() if os.path.exists(a.results) else header
    begin, end = f"<!-- BEGIN {sec} -->", f"<!-- END {sec} -->\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    write_atomic(a.results, text)


if __name__ == "__main__":
    main()
