"""callstitch on Apache Spark: throughput of callstitch.spark.reassemble against the CLI.

Writes a gateway log of captured responses (benchmarks/workload.py; OpenAI chat, Anthropic,
Responses and Gemini bodies) twice: as Parquet, the body a binary column, for Spark; and as
JSON lines, the body a string field, for ``callstitch reassemble --field body``. Then measures:

- the JVM's start-up (SparkSession.getOrCreate in local[2]) and the first job (Python workers
  forked, callstitch imported), reported separately;
- ``callstitch reassemble log.jsonl --field body -j 2`` end to end (JSON lines to /dev/null);
- the Spark job, JVM up: read the Parquet, reassemble, and write the calls (Spark's "noop"
  sink, and Parquet), with Spark's default Arrow batches of 10,000 rows and with batches of
  --batch-rows (smaller batches let the JVM and the Python workers overlap); the target is
  >= 50% of the CLI's -j 2;
- the per-row overhead: a log of tiny responses (one short call each) through both paths.

    python benchmarks/spark.py                     # 20,000 responses, ~1.2 GB; a few minutes
    python benchmarks/spark.py --responses 4000    # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workload  # noqa: E402

import orjson  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import callstitch  # noqa: E402

DISTINCT = 1600  # distinct responses; the log repeats them


def make_bodies(distinct: int, seed: int = 5) -> list[bytes]:
    """Return distinct response bodies: 70% OpenAI chat, the rest Anthropic, Responses, Gemini."""
    chat = int(distinct * 0.7)
    rest = (distinct - chat) // 3
    bodies = [b for b, _ in workload.responses(chat, seed=seed)]
    for fmt in ("anthropic", "openai-responses", "gemini"):
        bodies += [b for b, _ in workload.format_responses(fmt, rest, seed=seed)]
    # Interleave the formats, as a gateway's log would.
    return [bodies[i] for i in sorted(range(len(bodies)), key=lambda i: (i * 7919) % len(bodies))]


def write_logs(root: str, bodies: list[bytes], n: int, name: str) -> tuple[str, str, int]:
    """Write n rows (the bodies repeated) as Parquet and JSONL; return (parquet, jsonl, body bytes)."""
    parquet = os.path.join(root, name + ".parquet")
    jsonl = os.path.join(root, name + ".jsonl")
    schema = pa.schema([("request_id", pa.int64()), ("body", pa.binary())])
    total = 0
    step = 2000
    # Row groups of ~500 rows let Spark cut the file into many tasks.
    with pq.ParquetWriter(parquet, schema, compression="snappy", use_dictionary=["request_id"]) as writer, open(jsonl, "wb") as f:
        for start in range(0, n, step):
            ids = list(range(start, min(n, start + step)))
            chunk = [bodies[i % len(bodies)] for i in ids]
            total += sum(map(len, chunk))
            writer.write_table(pa.table({"request_id": pa.array(ids, pa.int64()),
                                         "body": pa.array(chunk, pa.binary())}, schema=schema),
                               row_group_size=500)
            f.write(b"".join(orjson.dumps({"request_id": i, "body": b.decode()}) + b"\n" for i, b in zip(ids, chunk)))
    return parquet, jsonl, total


def cli(jsonl: str, jobs: int) -> float:
    """Run the CLI on the log; return wall seconds."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "callstitch", "reassemble", jsonl, "--field", "body", "-j", str(jobs),
                    "--quiet", "-o", os.devnull], check=False)
    return time.perf_counter() - t


def spark_session():
    """Start local[2]; return (session, seconds)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    t = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("callstitch-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.files.maxPartitionBytes", str(64 << 20))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - t


def spark_job(spark, parquet: str, sink: str, out: str | None = None) -> float:
    """Reassemble the Parquet log and write the calls; return wall seconds."""
    from callstitch.spark import reassemble

    t = time.perf_counter()
    calls = reassemble(spark.read.parquet(parquet), keep=["request_id"])
    if sink == "noop":
        calls.write.format("noop").mode("overwrite").save()
    else:
        calls.write.mode("overwrite").parquet(out)
    return time.perf_counter() - t


def count_calls(spark, parquet: str) -> int:
    from callstitch.spark import reassemble

    return reassemble(spark.read.parquet(parquet), keep=["request_id"]).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=20000, help="rows in the log (default: %(default)s)")
    parser.add_argument("--tiny", type=int, default=200000, help="rows of the per-row overhead log")
    parser.add_argument("--batch-rows", type=int, default=500,
                        help="spark.sql.execution.arrow.maxRecordsPerBatch for the tuned runs (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measurement (best kept)")
    parser.add_argument("--dir", help="where to write the logs (default: a temporary directory)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="callstitch-spark-", dir=args.dir)
    try:
        print(f"callstitch {callstitch.__version__} ({callstitch.IMPLEMENTATION}), {os.cpu_count()} cores")
        t = time.perf_counter()
        bodies = make_bodies(min(DISTINCT, args.responses))
        parquet, jsonl, total = write_logs(root, bodies, args.responses, "gateway")
        tiny_body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
                     b'"function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}]}}]}\n\n'
                     b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
        tiny_parquet, tiny_jsonl, tiny_total = write_logs(root, [tiny_body], args.tiny, "tiny")
        print(f"log: {args.responses} responses, {total / 1e9:.2f} GB of bodies "
              f"(Parquet {os.path.getsize(parquet) / 1e9:.2f} GB, JSONL {os.path.getsize(jsonl) / 1e9:.2f} GB); "
              f"written in {time.perf_counter() - t:.0f} s")

        runs = range(args.repeat)
        cli2 = min(cli(jsonl, 2) for _ in runs)
        cli1 = cli(jsonl, 1)

        spark, startup = spark_session()
        t = time.perf_counter()
        calls = count_calls(spark, parquet)  # the first job: workers forked, callstitch imported
        first = time.perf_counter() - t
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")  # Spark's default
        noop_default = min(spark_job(spark, parquet, "noop") for _ in runs)
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch_rows))
        noop = min(spark_job(spark, parquet, "noop") for _ in runs)
        out = os.path.join(root, "calls.parquet")
        written = min(spark_job(spark, parquet, "parquet", out) for _ in runs)

        tiny_cli2 = min(cli(tiny_jsonl, 2) for _ in runs)
        tiny_spark = min(spark_job(spark, tiny_parquet, "noop") for _ in runs)
        spark.stop()

        mb = total / 1e6
        print(f"\n{calls} calls")
        print(f"JVM start-up (local[2] session): {startup:.1f} s; first job (count, workers started): {first:.1f} s")
        print(f"{'path':<52} {'s':>7} {'MB/s':>8} {'vs -j 2':>8}")
        for name, secs in [("callstitch reassemble --field body -j 1", cli1),
                           ("callstitch reassemble --field body -j 2", cli2),
                           ("spark local[2], JVM up: noop, 10000 rows/batch", noop_default),
                           (f"spark local[2], JVM up: noop, {args.batch_rows} rows/batch", noop),
                           (f"spark local[2], JVM up: Parquet, {args.batch_rows} rows/batch", written)]:
            print(f"{name:<52} {secs:7.1f} {mb / secs:8.1f} {cli2 / secs:7.0%}")
        verdict = "ok" if cli2 / written >= 0.5 else "BELOW TARGET"
        print(f"target: the Spark job writing Parquet >= 50% of -j 2: {cli2 / written:.0%} ({verdict})")
        n = args.tiny
        print(f"\nper row ({n} tiny responses, one call each, {tiny_total / n:.0f} bytes): "
              f"CLI -j 2 {tiny_cli2 / n * 1e6:.1f} us, spark local[2] (noop) {tiny_spark / n * 1e6:.1f} us "
              f"of wall time per row")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
