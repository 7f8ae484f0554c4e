"""Reassemble the tool calls of a gateway log on Apache Spark and write them as Parquet.

The log holds one captured response per row: Parquet (the body as a binary or string column)
or JSON lines (the body as a string, or a list of chunk objects). Each output row is one call:
the kept columns, then choice, index, id, name, arguments (JSON text), error, quirks,
raw_arguments, format and stream_errors (see callstitch.spark.reassemble).

    pip install 'callstitch[spark]'          # and a Java runtime, 17 or newer
    python examples/spark_reassemble.py gateway.parquet calls.parquet --body body --keep request_id
    python examples/spark_reassemble.py gateway.jsonl calls.parquet --body response.body
    spark-submit examples/spark_reassemble.py s3a://logs/2025/ s3a://calls/2025/ --master yarn

On a cluster, callstitch must be installed on the workers (or shipped with --py-files as a
wheel built for them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser."""
    p = argparse.ArgumentParser(description="Reassemble the tool calls of a log of captured responses on Spark.")
    p.add_argument("input", help="a Parquet file or directory, or JSON lines (*.jsonl, *.json, *.ndjson, gzipped too)")
    p.add_argument("output", help="where to write the calls, as Parquet (overwritten)")
    p.add_argument("--body", default="body", metavar="COLUMN",
                   help="the body column; a dotted path reaches into a struct (default: %(default)s)")
    p.add_argument("--keep", action="append", metavar="COLUMN",
                   help="a column to carry into each call row (repeat it); default: every top-level column "
                        "but the one holding the body")
    p.add_argument("--format", default="auto", help="the wire format, or auto (default: detected per row)")
    p.add_argument("--input-format", choices=("parquet", "json"),
                   help="how to read the input (default: from its name: JSON lines for .jsonl/.json/.ndjson)")
    p.add_argument("--master", help="the Spark master (default: spark-submit's, or local[*])")
    return p


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the job; use the given SparkSession, or start (and stop) one."""
    args = build_parser().parse_args(argv)
    # Run locally, the Python workers must be this interpreter (the one callstitch is installed in).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from callstitch.spark import reassemble

    own = spark is None
    if own:
        builder = SparkSession.builder.appName("callstitch-reassemble")
        if args.master:
            builder = builder.master(args.master)
        spark = builder.getOrCreate()
    try:
        started = time.perf_counter()
        kind = args.input_format
        if kind is None:
            name = args.input.lower().removesuffix(".gz").removesuffix(".zst").removesuffix(".bz2")
            kind = "json" if name.endswith((".jsonl", ".json", ".ndjson")) else "parquet"
        # Spark's JSON reader infers the schema from the data; give it one for logs of terabytes.
        logs = spark.read.json(args.input) if kind == "json" else spark.read.parquet(args.input)
        top = args.body.split(".")[0]
        keep = args.keep if args.keep else [c for c in logs.columns if c != top]
        body = "__body" if "." in args.body else args.body
        logs = logs.select(*[F.col(c) for c in keep], F.col(args.body).alias(body))
        calls = reassemble(logs, body_col=body, format=args.format, keep=keep)
        calls.write.mode("overwrite").parquet(args.output)

        written = spark.read.parquet(args.output)
        counts = written.agg(
            F.count(F.col("choice")).alias("calls"),
            F.count(F.col("error")).alias("bad_arguments"),
            F.sum(F.when(F.col("choice").isNull(), 1).otherwise(0)).alias("failed_streams"),
        ).first()
        print(f"{counts.calls} calls ({counts.bad_arguments} with bad arguments), "
              f"{counts.failed_streams or 0} streams with errors and no calls; "
              f"written to {args.output} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return 0
    finally:
        if own:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
