#!/usr/bin/env python3
"""`sediment merge` on DuckDB: merge.sql over Parquet profile tables, one merged profile per
binary, written as a Parquet table that `sediment import --format parquet` reads.

    python3 integrations/sql/duckdb_merge.py [--per-submitter] [--half-life DAYS [--now T]]
        [--cap-per-submitter C] -o merged.parquet fleet/*.parquet
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import merge_query  # noqa: E402

import duckdb  # noqa: E402


def main():
    args = merge_query.parse_args("DuckDB")
    for path in args.inputs:
        if not os.path.isfile(path):
            merge_query.fail(f"{path}: no such file")
    con = duckdb.connect()
    # The ascending, one-by-one sum of merge.sql: list_reduce adds from the first element.
    con.execute("CREATE MACRO sorted_sum(l) AS list_reduce(list_sort(l), lambda a, b: a + b)")
    files = ", ".join("'" + p.replace("'", "''") + "'" for p in args.inputs)
    # Tables of schema versions 1 and 2 side by side: columns matched by name, and a version-1
    # only input given the two sample columns, null.
    con.execute(f"CREATE VIEW tables AS SELECT * FROM read_parquet([{files}], union_by_name = true)")
    columns = {d[0] for d in con.execute("SELECT * FROM tables LIMIT 0").description}
    extra = "".join(f", CAST(NULL AS UBIGINT) AS {c}" for c in merge_query.SAMPLE_COLUMNS
                    if c not in columns)
    con.execute(f"CREATE VIEW profiles AS SELECT *{extra} FROM tables")
    tmp = args.output + ".tmp"
    target = "'" + tmp.replace("'", "''") + "'"
    try:
        con.execute(f"COPY ({merge_query.query(args)}) TO {target} (FORMAT parquet, "
                    "KV_METADATA {'sediment.schema': '2'})")
    except duckdb.Error as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        merge_query.fail(str(e).splitlines()[0])
    os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
