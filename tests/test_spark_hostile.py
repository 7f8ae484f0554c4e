"""callstitch.spark against hostile input: what the rows must hold, and what must never fail the job.

One local Spark for the module (test_spark.py's: local[2], loopback, no UI), its workers on
each twin in turn (test_spark.py's ``spark`` fixture), so every test runs [c] and [py]; the twin
test below also checks the workers' rows against the other twin, run here in a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

import orjson  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import callstitch  # noqa: E402
import callstitch.spark as cs_spark  # noqa: E402
from test_spark import spark, spark_session, spark_twin  # noqa: E402,F401 - the local Spark, as test_spark.py starts it

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CALL_FIELDS = ["choice", "index", "id", "name", "kind", "arguments", "error", "quirks"]


def _chat(choice: int = 0, call_id: str = "c1", arguments: str = '{"a": 1}', name: str = "f") -> str:
    chunk = {"choices": [{"index": choice, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}}]}
    return "data: " + json.dumps(chunk) + "\n\ndata: [DONE]\n\n"


def _rows(df, key: str = "k", **kwargs) -> list[dict]:
    rows = [r.asDict(recursive=True) for r in cs_spark.reassemble(df, **kwargs).collect()]
    rows.sort(key=lambda r: r[key])  # stable: the calls of one row keep their order
    return rows


# -- defects: each of these failed before its fix ------------------------------------------------

def test_a_choice_beyond_bigint_keeps_its_call(spark):
    # The core keeps a choice index as sent; 2**63 does not fit the bigint column, and building
    # the column raised OverflowError in the worker, which failed the job.
    gemini = ('data: {"candidates":[{"index":18446744073709551616,"content":{"role":"model","parts":'
              '[{"functionCall":{"name":"g","args":{"b":2}}}]},"finishReason":"STOP"}]}\n\n')
    bodies = [_chat(), _chat(choice=2 ** 63, call_id="big"), _chat(choice=-2 ** 63 - 1, call_id="neg"), gemini,
              _chat(choice=2 ** 63 - 1, call_id="max"), _chat(call_id="after")]
    df = spark.createDataFrame(list(enumerate(bodies)), "k long, body string").coalesce(1)
    rows = _rows(df)
    assert [(r["k"], r["id"], r["name"]) for r in rows] == [
        (0, "c1", "f"), (1, "big", "f"), (2, "neg", "f"), (3, None, "g"), (4, "max", "f"), (5, "after", "f")]
    assert [r["choice"] for r in rows] == [0, None, None, None, 2 ** 63 - 1, 0]
    assert [orjson.loads(r["arguments"]) for r in rows] == [{"a": 1}] * 3 + [{"b": 2}] + [{"a": 1}] * 2
    assert [r["index"] for r in rows] == [0] * 6
    # What and where: the value and the call, in the stream's errors; the other streams have none.
    assert rows[1]["stream_errors"] == [
        "choice 9223372036854775808 does not fit a bigint: written as null (call 'big', 'f')"]
    assert "choice -9223372036854775809 " in rows[2]["stream_errors"][0]
    assert "choice 18446744073709551616 " in rows[3]["stream_errors"][0] and "(call None, 'g')" in \
        rows[3]["stream_errors"][0]
    assert [r["stream_errors"] for r in rows if r["k"] in (0, 4, 5)] == [[], [], []]
    # The README's filter for the error rows takes a null body's, never a call row whose choice is null.
    with_null = spark.createDataFrame([(9, None)], "k long, body string").unionByName(df)
    assert [r["k"] for r in cs_spark.reassemble(with_null).where("index IS NULL").collect()] == [9]
    # Turns carry the choice inside the response's JSON, which holds any integer.
    turns = sorted(cs_spark.reassemble(df, emit="turns").collect(), key=lambda r: r["k"])
    assert orjson.loads(turns[1]["response"].encode())["choices"][0]["index"] == 2 ** 63
    assert [t["errors"] for t in turns] == [[]] * 6


def test_chunks_that_are_not_utf8_do_not_fail_the_job(spark):
    # A Spark string may hold any bytes (a cast from binary does not check them); reading the
    # whole array<string> column into Python raised UnicodeDecodeError and failed the job.
    good = [line[6:] for line in _chat(call_id="ok").splitlines() if line.startswith("data: {")]
    df = (spark.createDataFrame([(0, good), (1, good), (2, good)], "k long, chunks array<string>").coalesce(1)
          .withColumn("chunks", F.when(F.col("k") == 1, F.concat(
              F.array(F.expr("cast(unhex('FF7B22') as string)")), F.col("chunks"))).otherwise(F.col("chunks"))))
    rows = _rows(df, body_col="chunks")
    assert [(r["k"], r["id"], orjson.loads(r["arguments"])) for r in rows] == [(k, "ok", {"a": 1}) for k in range(3)]
    assert rows[0]["stream_errors"] == rows[2]["stream_errors"] == []
    # The bad chunk is skipped as a malformed chunk, as feed_chunk does with any bad JSON text.
    (error,) = rows[1]["stream_errors"]
    assert error.startswith("malformed chunk") and "UTF-8" in error
    turns = sorted(cs_spark.reassemble(df, body_col="chunks", emit="turns").collect(), key=lambda r: r["k"])
    assert [len(t["errors"]) for t in turns] == [0, 1, 0] and all(t["response"] for t in turns)


def test_a_null_chunk_in_a_list_keeps_the_calls_around_it(spark):
    # Found by a review of the README's promises: a null element of an array<string> chunk column,
    # or a null struct in an array<struct> one, made feed_chunk raise: the row lost every call.
    good = [line[6:] for line in _chat(call_id="ok").splitlines() if line.startswith("data: {")]
    finish = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    df = spark.createDataFrame([(0, good + [finish]), (1, good + [None, finish]), (2, [None] + good + ["5", finish])],
                               "k long, chunks array<string>")
    rows = _rows(df, body_col="chunks")
    assert [(r["k"], r["id"], orjson.loads(r["arguments"])) for r in rows] == [(k, "ok", {"a": 1}) for k in range(3)]
    assert [len(r["stream_errors"]) for r in rows] == [0, 1, 2]
    assert all(e.startswith("unexpected shape") for r in rows for e in r["stream_errors"])
    structs = spark.sql("""select 0 as k, array(named_struct('choices', array(named_struct('index', 0, 'delta',
        named_struct('tool_calls', array(named_struct('index', 0, 'id', 'ok', 'function',
        named_struct('name', 'f', 'arguments', '{}'))))))), null) as chunks""")
    (row,) = _rows(structs, body_col="chunks")
    assert (row["id"], row["name"], row["arguments"]) == ("ok", "f", "{}")
    assert [e.split(":")[0] for e in row["stream_errors"]] == ["unexpected shape"]


def test_kept_columns_that_clash_but_for_case_are_refused(spark):
    # Spark resolves names regardless of case by default: a kept "ID" beside the output "id"
    # made calls.select("id") ambiguous and calls.write.parquet() refuse the duplicate.
    df = spark.createDataFrame([(1, "x", 2, _chat())], "ID long, Name string, n int, body string")
    with pytest.raises(ValueError, match="'ID' would clash with the output column 'id'"):
        cs_spark.reassemble(df)
    with pytest.raises(ValueError, match="'Name' would clash"):
        cs_spark.reassemble(df, keep=["Name"])
    with pytest.raises(ValueError, match="'FORMAT' would clash"):
        cs_spark.reassemble(df.withColumnRenamed("n", "FORMAT"), keep=["FORMAT"], emit="turns")
    with pytest.raises(ValueError, match="twice"):
        cs_spark.reassemble(df.withColumnRenamed("n", "k").withColumnRenamed("Name", "K"), keep=["k", "K"])
    (row,) = cs_spark.reassemble(df, keep=["n"]).select("n", "id").collect()
    assert (row.n, row.id) == (2, "c1")
    # With case-sensitive names the columns are distinct, and allowed.
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        (row,) = cs_spark.reassemble(df, keep=["ID"]).select("ID", "id").collect()
        assert (row.ID, row.id) == (1, "c1")
    finally:
        spark.conf.set("spark.sql.caseSensitive", "false")


def _many_calls(n: int) -> str:
    return "".join("data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}]}}]}) + "\n\n" for i in range(n))


def test_rows_past_two_gib_of_text_do_not_fail_the_job(spark):
    # A stream's errors repeat on each of its call rows, a kept column on each call of its row:
    # one input row of under a megabyte gave 2 GiB of text in a column, past what one Arrow
    # string column holds, and the worker failed the job (and held it all, gigabytes at once).
    big = 530_000
    bodies = [
        (0, "t", _many_calls(4096) + "data: " + json.dumps({"error": {"message": "x" * big, "type": "e"}}) + "\n\n"),
        (1, "y" * big, _many_calls(4096) + "data: [DONE]\n\n"),
    ]
    df = spark.createDataFrame(bodies, "k long, tag string, body string").coalesce(1)
    calls = cs_spark.reassemble(df)
    got = calls.groupBy("k").agg(F.count("*").alias("n"), F.sum(F.length("tag")).alias("tag"),
                                 F.sum(F.aggregate("stream_errors", F.lit(0), lambda a, e: a + F.length(e)))
                                 .alias("errors"), F.count_distinct("id").alias("ids")).orderBy("k").collect()
    errors = sum(len(str(e)) for e in callstitch.reassemble(bodies[0][2]).errors)
    assert errors > big
    assert [tuple(r) for r in got] == [(0, 4096, 4096, 4096 * errors, 4096), (1, 4096, 4096 * big, 0, 4096)]


# -- what holds: checked here, found to hold --------------------------------------------------------

def _mangled(seed: int, n: int) -> list[str | None]:
    """Valid UTF-8 bodies of every text format, whole and mangled: cut, spliced, duplicated, CRLF."""
    rng = random.Random(seed)
    good = [b.decode() for b, _ in workload.responses(6, seed=seed)]
    for fmt in ("openai-responses", "anthropic", "gemini", "cohere", "ollama"):
        good += [b.decode() for b, _ in workload.format_responses(fmt, 2, seed=seed)]
    out: list[str | None] = [None, "", " ", "\n\n\n", ": keep-alive\n\n", "data: [DONE]\n\n", "data: null\n\n",
                             "data: []\n\n", "data: \"s\"\n\n", "{}\n", "[]", "null", "data: {\"choices\":null}\n\n"]
    out += good
    for _ in range(n):
        a, b = rng.choice(good), rng.choice(good)
        i, j = rng.randrange(len(a)), rng.randrange(len(b))
        out.append(rng.choice([a[:i], a[i:], a[:i] + b[j:], a + a, a.replace("\n", "\r\n"), a[:i] + "\x00" + a[i:],
                               a[:i] + "data: {" + a[i:], a.replace("\n\n", "\n", 2), a + "\n\n" + "data: {\n\n" * 3]))
    return out


def _log(tmp_path, bodies: list, field: str = "body") -> str:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(orjson.dumps({field: b} if b is not None else {"other": 1}) + b"\n" for b in bodies))
    return str(path)


def _as_records(rows, source: str) -> list[dict]:
    """The call rows as the CLI writes them (key column k as the stream)."""
    out = []
    for row in rows:
        if row["index"] is None:  # an error row (README: where("index IS NULL"))
            continue
        record = {"source": source, "stream": row["k"], **{name: row[name] for name in CALL_FIELDS}}
        record["arguments"] = None if row["arguments"] is None else json.loads(row["arguments"])
        if record["arguments"] is None:
            record["raw_arguments"] = row["raw_arguments"]
        if row["reason"] is not None:
            record["reason"] = row["reason"]
        out.append(record)
    return out


# event_bytes stays out: the CLI applies it to the whole log line too, which Spark never sees.
LIMITS = [None, callstitch.Limits(calls=2, call_bytes=40, stream_bytes=400, errors=2, choices=1)]


@pytest.mark.parametrize("limits", LIMITS, ids=["default", "tight"])
def test_mangled_bodies_equal_the_clis_records_calls_and_turns(spark, tmp_path, limits):
    bodies = _mangled(5, 60)
    path = _log(tmp_path, bodies)
    df = spark.createDataFrame(list(enumerate(bodies)), "k long, body string")
    calls = list(callstitch.reassemble_many([path], field="body", jobs=1, limits=limits, on_problem=lambda *a: None))
    rows = _rows(df, limits=limits)
    assert _as_records(rows, path) == calls
    turns = {r["stream"]: r for r in callstitch.reassemble_many([path], field="body", jobs=1, limits=limits,
                                                                emit="turns", on_problem=lambda *a: None)}
    got = sorted(cs_spark.reassemble(df, limits=limits, emit="turns").collect(), key=lambda r: r["k"])
    assert len(got) == len(bodies)
    for row in got:
        want = turns.get(row["k"])
        if want is None:  # a null body: the CLI reports the line, Spark gives the row with why
            assert bodies[row["k"]] is None and row["errors"] == ["no body: the body column is null"]
            continue
        response = None if row["response"] is None else json.loads(row["response"])
        assert (row["format"], row["complete"], response, row["errors"]) == (
            want["format"], want["complete"], want["response"], want["errors"]), row["k"]
    # Every stream with errors and no calls has exactly one row saying why; none is lost.
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    for k, body in enumerate(bodies):
        if body is None:
            continue
        result = callstitch.reassemble(body, limits=limits)
        assert len(by_key.get(k, [])) == (len(result.tool_calls) or (1 if result.errors else 0)), k


_OTHER_TWIN = r"""
import json, sys
import callstitch
out = []
for body in json.load(sys.stdin):
    r = callstitch.reassemble(body.encode("utf-8", "surrogatepass"))
    out.append([callstitch.IMPLEMENTATION, r.format, [str(e) for e in r.errors],
                [[c.choice, c.index, c.id, c.name, c.raw_arguments, None if c.error is None else str(c.error),
                  list(c.quirks)] for c in r.tool_calls]])
print(json.dumps(out))
"""


def test_the_workers_agree_with_the_other_twin(spark, spark_twin):
    bodies = [b for b in _mangled(9, 40) if b is not None]
    env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="0" if spark_twin == "py" else "1")
    workers = {"c": "c", "py": "python"}[spark_twin]
    done = subprocess.run([sys.executable, "-c", _OTHER_TWIN], input=json.dumps(bodies), env=env,
                          capture_output=True, text=True, check=True)
    other = json.loads(done.stdout)
    assert {o[0] for o in other} == {"c", "python"} - {workers}
    df = spark.createDataFrame(list(enumerate(bodies)), "k long, body string")
    rows = _rows(df)
    want = []
    for k, (_, fmt, errors, calls) in enumerate(other):
        if calls:
            want += [(k, fmt, errors, c[0], c[1], c[2], c[3], c[5], c[6]) for c in calls]
        elif errors:
            want.append((k, fmt, errors, None, None, None, None, None, None))
    assert [(r["k"], r["format"], r["stream_errors"], r["choice"], r["index"], r["id"], r["name"], r["error"],
             r["quirks"]) for r in rows] == want
