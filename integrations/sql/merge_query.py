"""The shared half of the SQL runners: command-line options and the query text.

`merge.sql` holds the query; this module checks the options as `sediment merge` does and
replaces the query's `${...}` parameters. Imported by duckdb_merge.py and spark_merge.py.
"""

import argparse
import math
import os
import sys
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))

# The columns schema version 2 adds (per-instruction samples); absent from version-1 tables.
SAMPLE_COLUMNS = ("offset", "sample_weight")


def parse_args(engine):
    p = argparse.ArgumentParser(
        prog=os.path.basename(sys.argv[0]),
        description=f"sediment merge of Parquet profile tables, run on {engine} "
        "(integrations/sql/merge.sql; docs/guide/fleet.md)",
    )
    p.add_argument("-o", "--output", required=True, help="where to write the merged table (Parquet)")
    p.add_argument("--per-submitter", action="store_true",
                   help="each submitter counts as one input of weight 1")
    p.add_argument("--half-life", type=float, metavar="DAYS",
                   help="decay each submission by 0.5^(age / DAYS)")
    p.add_argument("--now", type=int, metavar="UNIX_SECONDS",
                   help="with --half-life: the time ages are measured from "
                   "(default: the newest recorded_at of each binary)")
    p.add_argument("--cap-per-submitter", type=float, metavar="C",
                   help="scale a submitter whose effective weights sum to more than C down to C")
    p.add_argument("inputs", nargs="+", metavar="INPUT.parquet",
                   help="Parquet tables of schema version 1 or 2 (sediment export --format parquet)")
    a = p.parse_args()
    for name, v in (("--half-life", a.half_life), ("--cap-per-submitter", a.cap_per_submitter)):
        if v is not None and not (math.isfinite(v) and v > 0):
            p.error(f"{name} must be a finite number > 0")
    if a.now is not None and a.half_life is None:
        p.error("--now is only used with --half-life")
    return a


def rust_float(x):
    """A float as Rust's `Display` prints an f64: shortest digits, no exponent, no `.0`."""
    s = format(Decimal(repr(x)), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def query(args):
    """merge.sql with its parameters replaced."""
    with open(os.path.join(HERE, "merge.sql"), encoding="utf-8") as f:
        text = f.read()
    num = lambda v: "NULL" if v is None else repr(float(v))
    lit = lambda v: "NULL" if v is None else "'" + rust_float(v) + "'"
    params = {
        "per_submitter": "TRUE" if args.per_submitter else "FALSE",
        "half_life_days": num(args.half_life),
        "half_life_text": lit(args.half_life),
        "now": "NULL" if args.now is None else str(int(args.now)),
        "cap": num(args.cap_per_submitter),
        "cap_text": lit(args.cap_per_submitter),
    }
    for k, v in params.items():
        text = text.replace("${" + k + "}", v)
    return text


def fail(message):
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(1)
