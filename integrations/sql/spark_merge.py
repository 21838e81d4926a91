#!/usr/bin/env python3
"""`sediment merge` on Apache Spark: merge.sql over Parquet profile tables, one merged profile
per binary, written as one Parquet file that `sediment import --format parquet` reads.

    python3 integrations/sql/spark_merge.py [--master local[2]] [--per-submitter]
        [--half-life DAYS [--now T]] [--cap-per-submitter C] -o merged.parquet fleet/*.parquet

With `--master` a cluster's URL the same query runs distributed; the merged result (one
profile per binary) is small and is written as a single file.
"""

import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import merge_query  # noqa: E402


def main():
    master = "local[2]"
    if "--master" in sys.argv:
        i = sys.argv.index("--master")
        master = sys.argv[i + 1] if i + 1 < len(sys.argv) else merge_query.fail("--master needs a URL")
        del sys.argv[i:i + 2]
    args = merge_query.parse_args("Apache Spark")
    for path in args.inputs:
        if not os.path.isfile(path):
            merge_query.fail(f"{path}: no such file")
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import lit

    spark = (SparkSession.builder.master(master).appName("sediment-merge")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # The ascending, one-by-one sum of merge.sql (a SQL function, Spark 4).
    spark.sql("CREATE TEMPORARY FUNCTION sorted_sum(l ARRAY<DOUBLE>) RETURNS DOUBLE "
              "RETURN aggregate(array_sort(l), CAST(0 AS DOUBLE), (acc, x) -> acc + x)")
    # Tables of schema versions 1 and 2 side by side: columns matched by name, and a version-1
    # only input given the two sample columns, null.
    tables = (spark.read.option("mergeSchema", "true")
              .parquet(*[os.path.abspath(p) for p in args.inputs]))
    for c in merge_query.SAMPLE_COLUMNS:
        if c not in tables.columns:
            tables = tables.withColumn(c, lit(None).cast("decimal(20,0)"))
    tables.createOrReplaceTempView("profiles")
    out_dir = tempfile.mkdtemp(prefix=".spark-merge-", dir=os.path.dirname(os.path.abspath(args.output)))
    try:
        spark.sql(merge_query.query(args)).coalesce(1).write.mode("overwrite").parquet(out_dir)
        parts = glob.glob(os.path.join(out_dir, "part-*.parquet"))
        if len(parts) != 1:
            merge_query.fail(f"{out_dir}: expected one part file, found {len(parts)}")
        os.replace(parts[0], args.output)
    except Exception as e:  # Spark's errors are many lines; keep the first
        merge_query.fail(str(e).strip().splitlines()[0] if str(e).strip() else repr(e))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
