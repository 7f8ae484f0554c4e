"""callstitch.spark on a local Spark: the rows equal reassemble_many's records, row for row.

One SparkSession (local[2], no UI, bound to the loopback) serves the whole module. The Spark
workers are separate processes that pick their implementation the way any import does (the
CALLSTITCH_NO_EXTENSIONS variable), so every test runs twice, [c] and [py]: the ``spark``
fixture hands the workers the variable through Spark's environment and runs reassemble_many
here on the same twin, which the rows are compared with. One JVM serves both.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys

import pytest

pytest.importorskip("pyspark")
# PySpark 4 warns about pandas 3 on every Arrow call; callstitch.spark does not use pandas.
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

import orjson  # noqa: E402
import pyarrow as pa  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

import callstitch  # noqa: E402
import callstitch.spark as cs_spark  # noqa: E402
from callstitch._batch import settings  # noqa: E402
from callstitch._formats import registry  # noqa: E402
from conftest import IMPLEMENTATIONS, load_implementation  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402
from test_json_documents import DOCUMENTS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(HERE, "fixtures", "captures")
FORMATS = set(registry.ADAPTERS)
CALL_FIELDS = ["choice", "index", "id", "name", "kind", "arguments", "error", "quirks"]


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


@pytest.fixture(scope="module")
def spark_session():
    """One local Spark for the module: 2 cores, small batches and partitions, loopback only."""
    if _java() is None:
        pytest.fail("the Spark tests need a Java runtime (17 or newer) and found none: install one "
                    "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME", pytrace=False)
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers must import this callstitch
    session = (SparkSession.builder.master("local[2]").appName("callstitch-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "16")  # several batches per partition
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    if saved is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = saved


@pytest.fixture(scope="module", params=list(IMPLEMENTATIONS), ids=list(IMPLEMENTATIONS))
def spark_twin(request):
    """The twin the Spark workers, and reassemble_many here, run on: "c" or "py"."""
    return request.param


@pytest.fixture(scope="module")
def spark(spark_session, spark_twin):
    """The local Spark with its workers on one twin, and the batch layer here on the same.

    Spark hands SparkContext.environment to each Python function it wraps from then on, and
    starts workers anew for a new environment: one JVM serves both twins.
    """
    environment = spark_session.sparkContext.environment
    saved = environment.get("CALLSTITCH_NO_EXTENSIONS"), settings.Accumulator
    environment["CALLSTITCH_NO_EXTENSIONS"] = "1" if spark_twin == "py" else "0"
    settings.Accumulator = load_implementation(spark_twin).Accumulator
    yield spark_session
    if saved[0] is None:
        environment.pop("CALLSTITCH_NO_EXTENSIONS", None)
    else:
        environment["CALLSTITCH_NO_EXTENSIONS"] = saved[0]
    settings.Accumulator = saved[1]


# -- inputs -----------------------------------------------------------------------------------

def _capture_paths(ext: str) -> list[str]:
    return sorted(glob.glob(os.path.join(CAPTURES, "*." + ext)))


def _generated() -> list[bytes]:
    bodies = [b for b, _ in workload.responses(6, seed=3)]
    for fmt in sorted(FORMATS - {"openai-chat", "bedrock"}):  # bedrock's generated bodies are binary
        bodies += [b for b, _ in workload.format_responses(fmt, 3, seed=3)]
    return bodies


BAD_TEXT = [
    "data: {not json\n\n",
    "",                                                            # nothing: no row at all
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":"
    "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1\"}}]}}]}\n\n",   # truncated arguments: a call with an error
    "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
    "\x00\x01 random bytes \ufffd\n\n",
]


def _text_bodies() -> list[str | None]:
    """Every text capture, generated bodies of every text format, bad bodies and a null, mixed."""
    good = [open(p, encoding="utf-8").read() for p in _capture_paths("sse")]
    good += [b.decode() for b in _generated()]
    # pretty-printed documents: a non-streamed response's calls, an error body's message
    good += [orjson.dumps(DOCUMENTS[name], option=orjson.OPT_INDENT_2).decode() for name in ("openai-chat", "error")]
    bodies: list[str | None] = []
    bad = BAD_TEXT + [None]
    for i, body in enumerate(good):
        bodies.append(body)
        if i % 7 == 3 and bad:
            bodies.append(bad.pop())
    return bodies + bad


def _log(tmp_path, bodies: list, field: str = "body", name: str = "log.jsonl") -> str:
    """Write the bodies as a JSONL log, one per line (a null body: a line without the field)."""
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps({field: b} if b is not None else {"other": 1}) + b"\n"
                              for b in bodies))
    return str(path)


def _expected(sources, **kwargs) -> tuple[list[dict], list[tuple]]:
    problems: list[tuple] = []
    batch = callstitch.reassemble_many(sources, jobs=1, on_problem=lambda *a: problems.append(a), **kwargs)
    return list(batch), problems


def _records(rows, key: str, source: str | None = None) -> list[dict]:
    """Turn the call rows back into the CLI's records (``stream`` from the key column)."""
    out = []
    for row in rows:
        if row["choice"] is None:
            continue
        record = {"source": source if source is not None else row["source"], "stream": row[key]}
        for name in CALL_FIELDS:
            record[name] = row[name]
        record["arguments"] = None if row["arguments"] is None else orjson.loads(row["arguments"])
        if record["arguments"] is None:
            record["raw_arguments"] = row["raw_arguments"]
        else:
            assert row["raw_arguments"] is None
        if row["reason"] is not None:  # arguments too deep to write as JSON
            record["reason"] = row["reason"]
        out.append(record)
    return out


def _collect(df, key: str) -> list[dict]:
    rows = [r.asDict(recursive=True) for r in df.collect()]
    rows.sort(key=lambda r: r[key])  # stable: the calls of one row keep their order
    return rows


# -- equal to reassemble_many -----------------------------------------------------------------

def test_workers_run_the_twin_of_the_test(spark, spark_twin):
    def which(batches):
        import callstitch as cs
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"impl": [cs.IMPLEMENTATION] * batch.num_rows})

    got = {r.impl for r in spark.range(4).mapInArrow(which, "impl string").collect()}
    assert got == {{"c": "c", "py": "python"}[spark_twin]}
    assert settings.Accumulator is load_implementation(spark_twin).Accumulator


def test_string_bodies_equal_reassemble_many(spark, tmp_path):
    bodies = _text_bodies()
    path = _log(tmp_path, bodies)
    expected, problems = _expected([path], field="body")
    df = spark.createDataFrame(list(enumerate(bodies)), "line long, body string")
    rows = _collect(cs_spark.reassemble(df), "line")

    assert _records(rows, "line", path) == expected
    assert len(expected) > 60
    # Every stream that had problems and no calls gives one error row; no other row is empty.
    with_calls = {r["stream"] for r in expected}
    error_rows = {r["line"]: r for r in rows if r["choice"] is None}
    assert set(error_rows) == {p[2] for p in problems if p[2] not in with_calls}
    for line, row in error_rows.items():
        assert row["stream_errors"] and all(row[f] is None for f in CALL_FIELDS + ["raw_arguments"])
        # (the batch says where in a logged body an error is; Spark's text says it as "at byte N")
        messages = [re.sub(r" \(at byte \d+ of the logged body\)$", "", p[5]) for p in problems if p[2] == line]
        assert all(any(m in text or text.startswith("no body") for text in row["stream_errors"]) for m in messages)
    assert error_rows[bodies.index(None)]["stream_errors"] == ["no body: the body column is null"]
    assert {r["format"] for r in rows if r["choice"] is not None} == FORMATS


def test_binary_bodies_every_format(spark, tmp_path):
    # The captures as they are on disk, the binary AWS event streams (Bedrock) among them.
    paths = _capture_paths("sse") + _capture_paths("eventstream")
    expected, _ = _expected(paths)
    df = spark.createDataFrame([(p, open(p, "rb").read()) for p in paths], "source string, body binary")
    rows = [r.asDict(recursive=True) for r in cs_spark.reassemble(df, keep="source").collect()]
    rows.sort(key=lambda r: paths.index(r["source"]))
    got = _records(rows, "source")
    for record in got:  # each file holds one response: stream 0
        record["stream"] = 0
    assert got == expected
    assert {r["format"] for r in rows if r["choice"] is not None} == FORMATS - {"ollama"}
    assert any(r["format"] == "bedrock" and p.endswith(".eventstream")
               for r in rows for p in [r["source"]])


def test_pretty_printed_documents_give_their_calls_and_errors(spark):
    # A non-streamed response's calls (of each format) and an error body's message, as the library reads them.
    names = ("openai-chat", "error", "anthropic", "openai-responses", "gemini", "ollama")
    bodies = [orjson.dumps(DOCUMENTS[name], option=orjson.OPT_INDENT_2) for name in names]
    df = spark.createDataFrame([(i, b.decode()) for i, b in enumerate(bodies)], "k long, body string")
    rows = _collect(cs_spark.reassemble(df), "k")
    paris = json.dumps({"city": "Paris"}, separators=(",", ":"))
    assert [(r["k"], r["id"], r["arguments"]) for r in rows if r["choice"] is not None] == [
        (0, "call_1", paris), (2, "toolu_1", paris), (3, "call_1", paris), (4, None, paris), (5, None, paris)]
    assert [r["stream_errors"] for r in rows if r["k"] == 1] == [
        ["in-band error at byte 0: invalid_request_error: Incorrect API key provided: sk-***}"]]


def test_string_and_binary_columns_agree(spark):
    bodies = [b for b in _text_bodies() if b is not None]
    text = spark.createDataFrame(list(enumerate(bodies)), "k long, body string")
    binary = spark.createDataFrame([(i, b.encode()) for i, b in enumerate(bodies)], "k long, body binary")
    assert _collect(cs_spark.reassemble(text), "k") == _collect(cs_spark.reassemble(binary), "k")


def test_generated_binary_bedrock_and_a_named_format(spark):
    bodies = [b for b, _ in workload.format_responses("bedrock", 20, seed=5)]
    df = spark.createDataFrame(list(enumerate(bodies)), "k int, body binary")
    rows = _collect(cs_spark.reassemble(df, format="bedrock"), "k")
    expected = [(i, c.to_dict()) for i, b in enumerate(bodies)
                for c in callstitch.reassemble(b, format="bedrock").tool_calls]
    assert [(r["k"], r["name"], orjson.loads(r["arguments"])) for r in rows] == \
        [(i, d["name"], d["arguments"]) for i, d in expected]
    assert {r["format"] for r in rows} == {"bedrock"}


def _chunk_lists() -> list[list[str]]:
    """The data payloads of the SSE captures, one list of JSON texts per response."""
    lists = []
    for path in _capture_paths("sse"):
        text = open(path, encoding="utf-8").read()
        chunks = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        lists.append([c for c in chunks if c.startswith("{")])
    return lists


def test_chunks_as_json_strings(spark, tmp_path):
    lists = _chunk_lists() + [["{not json"], ["[1, 2]"], []]
    path = _log(tmp_path, [[orjson.loads(c) if c.startswith("{") and c != "{not json" else c for c in chunks]
                           for chunks in lists], field="chunks")
    expected, problems = _expected([path], field="chunks")
    df = spark.createDataFrame(list(enumerate(lists)), "line long, chunks array<string>")
    rows = _collect(cs_spark.reassemble(df, body_col="chunks"), "line")
    assert _records(rows, "line", path) == expected
    assert len({r["stream"] for r in expected}) > 25
    error_lines = {r["line"] for r in rows if r["choice"] is None}
    assert {len(lists) - 3, len(lists) - 2} <= error_lines
    assert error_lines <= {p[2] for p in problems}


def test_chunks_as_structs_read_from_json(spark, tmp_path):
    # A gateway log of OpenAI chat chunks, read by Spark's JSON reader: an array<struct> column.
    lists = [[orjson.loads(c) for c in chunks] for chunks, p in zip(_chunk_lists(), _capture_paths("sse"))
             if callstitch.reassemble(open(p, "rb").read(), format="auto").format == "openai-chat"]
    path = tmp_path / "chunks.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"line": i, "response": {"chunks": c}}) + b"\n"
                              for i, c in enumerate(lists)))
    expected, _ = _expected([str(path)], field="response.chunks")
    df = spark.read.json(str(path)).selectExpr("line", "response.chunks AS chunks")
    assert isinstance(df.schema["chunks"].dataType.elementType, T.StructType)
    rows = _collect(cs_spark.reassemble(df, body_col="chunks"), "line")
    assert _records(rows, "line", str(path)) == expected
    assert len(expected) >= len(lists)


# -- bad input, shapes, options ---------------------------------------------------------------

def test_bad_bodies_give_error_rows(spark):
    bad = [b"\xff\xfe\x00garbage", b"data: {\n\n", b"\x00\x00\x00\x10\x00\x00\x00\x00broken eventstream",
           b"data: " + b"[" * 100_000 + b"\n\n", None, os.urandom(5000), b"event: error\ndata: {}\n\n"]
    good = [b for b, _ in workload.responses(3, seed=11)]
    df = spark.createDataFrame(list(enumerate(bad + good)), "k long, body binary")
    rows = _collect(cs_spark.reassemble(df), "k")
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    for k in range(len(bad)):
        if k in by_key:
            (row,) = by_key[k]
            assert row["choice"] is None and row["stream_errors"], row
    # An error row exactly where the library reports stream errors (and for the null body).
    erring = {k for k, b in enumerate(bad) if b is None or callstitch.reassemble(b, format="auto").errors}
    assert {k for k in by_key if k < len(bad)} == erring
    assert {1, 2, 3, 4, 6} <= erring
    expected = sum(len(callstitch.reassemble(b, format="auto").tool_calls) for b in good)
    assert sum(len(by_key[k]) for k in range(len(bad), len(bad) + len(good))) == expected


def test_limits_reach_the_workers(spark, tmp_path):
    bodies = [b.decode() for b, _ in workload.responses(40, seed=2)]
    limits = callstitch.Limits(calls=1, call_bytes=300)
    path = _log(tmp_path, bodies)
    expected, _ = _expected([path], field="body", limits=limits)
    df = spark.createDataFrame(list(enumerate(bodies)), "line long, body string")
    rows = _collect(cs_spark.reassemble(df, limits=limits), "line")
    assert _records(rows, "line", path) == expected
    assert len(rows) == len({r["line"] for r in rows})  # one call per stream
    assert any("Limits.calls" in e for r in rows for e in r["stream_errors"])
    assert any("Limits.call_bytes" in e for r in rows for e in r["stream_errors"])
    for r in rows:  # each limit's error says where: its event in the stream's body
        for e in r["stream_errors"]:
            if e.startswith("limit"):
                at = int(e.split(":", 1)[0].rsplit(" ", 1)[1])
                assert bodies[r["line"]].encode()[at:].startswith(b"data: "), e


def test_empty_dataframe(spark):
    df = spark.createDataFrame([], "k long, body binary")
    out = cs_spark.reassemble(df)
    assert out.schema == cs_spark.call_schema([df.schema["k"]])
    assert out.collect() == []


def test_schema_and_keep(spark):
    df = spark.createDataFrame([(1, "a", 2.5, b"data: [DONE]\n\n")], "k long, tag string, score double, body binary")
    out = cs_spark.reassemble(df)
    assert out.columns == ["k", "tag", "score", "choice", "index", "id", "name", "kind", "arguments", "error", "quirks",
                           "raw_arguments", "reason", "format", "stream_errors"]
    assert out.schema["quirks"].dataType == T.ArrayType(T.StringType())
    assert cs_spark.reassemble(df, keep=["tag", "body"]).columns[:2] == ["tag", "body"]
    assert cs_spark.reassemble(df, keep=()).columns[0] == "choice"
    dotted = df.withColumnRenamed("body", "raw.body")  # a dot in a name is part of it
    assert cs_spark.reassemble(dotted, body_col="raw.body", keep=["k"]).collect() == []


def test_usage_errors(spark):
    df = spark.createDataFrame([(1, "x", 2)], "id long, body string, n int")
    with pytest.raises(ValueError, match="'id' would clash"):
        cs_spark.reassemble(df)
    assert cs_spark.reassemble(df, keep=["n"]).columns[0] == "n"
    with pytest.raises(ValueError, match="no column 'payload'"):
        cs_spark.reassemble(df, body_col="payload")
    with pytest.raises(ValueError, match="not a column"):
        cs_spark.reassemble(df, keep=["missing"])
    with pytest.raises(ValueError, match="unknown format"):
        cs_spark.reassemble(df, keep=["n"], format="openai")
    with pytest.raises(TypeError, match="expected a body"):
        cs_spark.reassemble(df, body_col="n", keep=[])
    with pytest.raises(TypeError, match="callstitch.Limits"):
        cs_spark.reassemble(df, keep=["n"], limits={"calls": 1})


def test_example_round_trip(spark, tmp_path):
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    try:
        import spark_reassemble
    finally:
        sys.path.pop(0)
    bodies = [b for b, _ in workload.responses(30, seed=4)]
    log = tmp_path / "gateway.jsonl"
    log.write_bytes(b"".join(orjson.dumps({"request_id": f"r{i}", "response": {"body": b.decode()}}) + b"\n"
                             for i, b in enumerate(bodies)))
    out = tmp_path / "calls.parquet"
    spark_reassemble.main([str(log), str(out), "--body", "response.body", "--keep", "request_id"], spark=spark)
    import pyarrow.parquet as pq
    table = pq.read_table(str(out)).to_pylist()
    expected = [(f"r{i}", c.name, c.arguments) for i, b in enumerate(bodies)
                for c in callstitch.reassemble(b, format="auto").tool_calls]
    got = [(r["request_id"], r["name"], orjson.loads(r["arguments"])) for r in table]
    # Spark writes a file per task; the calls of one request stay in order (a stable sort).
    assert sorted(got, key=lambda t: int(t[0][1:])) == expected


def test_lone_surrogates_do_not_fail_the_task(spark):
    # The fallback JSON parser lets a lone surrogate through into an id or a name; Arrow's
    # strings are UTF-8, so it comes out as U+FFFD rather than failing the job.
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c\\ud800","function":'
            b'{"name":"f\\udc00x","arguments":"{\\"a\\": 1}"}}]}}]}\n\ndata: [DONE]\n\n')
    assert callstitch.reassemble(body).tool_calls[0].name == "f\udc00x"
    df = spark.createDataFrame([(1, body)], "k int, body binary")
    (row,) = cs_spark.reassemble(df).collect()
    assert (row.id, row.name, row.arguments) == ("c\ufffd", "f\ufffdx", '{"a":1}')


def _chat(arguments: str, call_id: str) -> str:
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}]}}]}
    return "data: " + orjson.dumps(chunk).decode() + "\n\ndata: [DONE]\n\n"


def test_integers_beyond_a_double_reach_the_rows_exactly(spark):
    # orjson refuses an integer of 310+ digits: in a body's arguments, and in a chunk given as JSON
    # text (an Ollama call's arguments are a value), the workers read it exactly, as the library does.
    big = 7 * 10**400
    body = _chat('{"n": %d}' % big, "call_1").encode()
    (row,) = cs_spark.reassemble(spark.createDataFrame([(1, body)], "k int, body binary")).collect()
    assert row.error is None and json.loads(row.arguments) == {"n": big}
    chunks = ['{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f",'
              '"arguments":{"n":%d}}}]},"done":false}' % big,
              '{"model":"m","message":{"role":"assistant","content":""},"done":true}']
    df = spark.createDataFrame([(1, chunks)], "k int, chunks array<string>")
    (row,) = cs_spark.reassemble(df, body_col="chunks", format="ollama").collect()
    assert row.error is None and json.loads(row.arguments) == {"n": big}


def test_a_call_an_unreadable_chunk_held_a_piece_of_is_a_cut_row(spark):
    # A chunk cut short in the middle of a call: its row is cut (no arguments, the reason), never
    # arguments that parse without the piece; as a body and as a list of chunks alike.
    start = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",' \
            '"function":{"name":"f","arguments":"{\\"a\\": 1"}}]}}]}'
    cut = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":", \\"b'
    end = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}'
    chunks = [start, cut, end]
    body = "".join(f"data: {c}\n\n" for c in chunks).encode()
    assert callstitch.reassemble(body).tool_calls[0].raw_arguments == '{"a": 1'
    (row,) = cs_spark.reassemble(spark.createDataFrame([(1, body)], "k int, body binary")).collect()
    assert row.arguments is None and "could not be read" in row.error and row.stream_errors
    df = spark.createDataFrame([(1, chunks)], "k int, chunks array<string>")
    (row,) = cs_spark.reassemble(df, body_col="chunks", format="openai-chat").collect()
    assert row.arguments is None and "could not be read" in row.error and row.stream_errors


def test_a_1000_deep_call_is_written_raw_with_its_reason(spark, tmp_path):
    # orjson reads arguments nested up to 1,023 deep but writes only 254 levels; the fallback
    # raised RecursionError past ~1,000, which failed the task, and with it the job.
    deep = '{"a":' + "[" * 999 + "]" * 999 + "}"
    mid = '{"a":' + "[" * 299 + "]" * 299 + "}"  # too deep for orjson to write, not for the fallback
    bodies = [_chat('{"x": 1}', "before"), _chat(deep, "deep"), _chat(mid, "mid"), _chat('{"y": 2}', "after")]
    path = _log(tmp_path, bodies)
    expected, problems = _expected([path], field="body")
    df = spark.createDataFrame(list(enumerate(bodies)), "line long, body string")
    rows = _collect(cs_spark.reassemble(df), "line")
    assert [r["id"] for r in rows] == ["before", "deep", "mid", "after"]
    assert rows[1]["arguments"] is None and rows[1]["error"] is None and rows[1]["raw_arguments"] == deep
    assert rows[1]["reason"] == "arguments nested deeper than 500 levels: kept as raw_arguments only"
    assert orjson.loads(rows[2]["arguments"]) == orjson.loads(mid) and rows[2]["reason"] is None
    assert _records(rows, "line", path) == expected  # the CLI writes the same
    assert [p[4] for p in problems] == ["arguments not written"]


def _hostile_bodies() -> list[bytes | None]:
    """Bodies no one should send, seeded: random bytes, HTML, deep JSON, huge lines, NULs, nulls, cut streams."""
    rng = __import__("random").Random(18)
    good = [b for b, _ in workload.responses(4, seed=8)]
    deep_call = _chat('{"a":' + "[" * 999 + "]" * 999 + "}", "deep").encode()
    bodies: list[bytes | None] = [
        None, b"", b"\x00" * 4096, b"<html><body><h1>502 Bad Gateway</h1></body></html>",
        b"data: " + b"[" * 300_000 + b"\n\n", b"data: " + b"{" * 2000 + b"\n\n" + good[0],
        b"data: " + b"x" * (3 << 20),                             # a 3 MiB line that never ends
        b"data: {" + b"y" * (2 << 20) + b"\n\n" + good[1],         # a 2 MiB bad line, then a stream
        deep_call, deep_call[: len(deep_call) // 2], good[2][: len(good[2]) // 3],
        b"event: error\ndata: {\"type\":\"error\"}\n\n", b"\xef\xbb\xbf\r\n\r\n" + good[3],
        b'{"done": true}\n' * 50, b"data: [DONE]\n\n" * 3,
    ]
    for _ in range(25):
        body = rng.choice(good)
        cut = rng.randrange(len(body))
        bodies.append(rng.choice([rng.randbytes(rng.randrange(1, 3000)), body[:cut] + rng.randbytes(50) + body[cut:],
                                  body[:cut], body.replace(b"\n", b"\r\n"), body[cut:]]))
    return bodies


def _rows_for(result) -> int:
    return len(result.tool_calls) or (1 if result.errors else 0)


def test_hostile_bodies_give_one_row_per_call_or_error(spark):
    bodies = _hostile_bodies()
    df = spark.createDataFrame(list(enumerate(bodies)), "k long, body binary")
    rows = _collect(cs_spark.reassemble(df, limits=callstitch.Limits(event_bytes=1 << 20)), "k")
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    for k, body in enumerate(bodies):
        got = by_key.get(k, [])
        if body is None:
            assert [r["stream_errors"] for r in got] == [["no body: the body column is null"]]
            continue
        want = callstitch.reassemble(body, format="auto", limits=callstitch.Limits(event_bytes=1 << 20))
        assert len(got) == _rows_for(want), k
        assert [r["stream_errors"] for r in got] == [[str(e) for e in want.errors]] * len(got), k
        for row, call in zip(got, want.tool_calls):
            assert (row["id"], row["name"], row["error"]) == (call.id, call.name, call.error and str(call.error)), k
            if row["arguments"] is not None:
                assert orjson.loads(row["arguments"]) == call.arguments
            else:
                assert row["raw_arguments"] == call.raw_arguments
    assert sum(map(len, by_key.values())) == len(rows) > len(bodies) // 2


def test_hostile_chunk_lists_give_one_row_per_call_or_error(spark):
    good = _chunk_lists()[:3]
    lists = [None, [], [None], ["null"], ["{"], ["[" * 5000], ["{" + '"a":' * 3000 + "1"], ["x" * (1 << 20)],
             good[0] + ["\x00garbage"], [c for c in good[1]] + [None], ["{}"] * 200, good[2]]
    df = spark.createDataFrame(list(enumerate(lists)), "k long, chunks array<string>")
    rows = _collect(cs_spark.reassemble(df, body_col="chunks"), "k")
    keys = [r["k"] for r in rows]
    for k, chunks in enumerate(lists):
        n = keys.count(k)
        if chunks is None:
            assert n == 1
            continue
        acc = callstitch.Accumulator(format="auto")
        try:
            for c in chunks:
                acc.feed_chunk(c)
            want = _rows_for(acc.finalize())
        except (TypeError, ValueError):  # the job gives such a list one error row
            want = 1
        assert n == want, (k, n, want)


def test_custom_calls_have_their_kind(spark, tmp_path):
    from test_kind_records import EXPECTED, custom_body

    body = custom_body()
    path = tmp_path / "custom.sse"
    path.write_bytes(body)
    expected, _ = _expected([str(path)])
    df = spark.createDataFrame([(str(path), body)], "source string, body binary")
    rows = [r.asDict(recursive=True) for r in cs_spark.reassemble(df, keep="source").collect()]
    assert [(r["name"], r["kind"], orjson.loads(r["arguments"])) for r in rows] == EXPECTED
    got = _records(rows, "source")
    for record in got:
        record["stream"] = 0
    assert got == expected
    assert cs_spark.call_schema()["kind"].dataType == T.StringType()


# -- emit="turns" ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["anthropic-citations", "gemini-citations"])
def test_the_turns_own_fields_stay_within_the_stream_budget(spark, case):
    # A stream repeating a citation: the turn keeps its own fields within Limits.stream_bytes
    # (tests/test_limits_turn.py says how), on the workers as in the library.
    from test_limits_turn import BUDGET, REPEATS, _body, _citations
    _, body = _body(case, REPEATS)
    df = spark.createDataFrame([(0, body.decode())], "n long, body string")
    free, = cs_spark.reassemble(df, keep="n", emit="turns").collect()
    held, = cs_spark.reassemble(df, keep="n", emit="turns", limits=callstitch.Limits(stream_bytes=BUDGET)).collect()
    assert _citations(orjson.loads(free["response"])) == REPEATS
    assert 0 < _citations(orjson.loads(held["response"])) < BUDGET // 100
    assert any("the turn keeps" in e for e in held["errors"])


def test_turn_rows_equal_the_clis_turn_records(spark, tmp_path):
    bodies = _text_bodies()
    log = _log(tmp_path, bodies)
    expected, _ = _expected([log], field="body", emit="turns")
    df = spark.createDataFrame([(i, b) for i, b in enumerate(bodies)], "n long, body string")
    rows = sorted(cs_spark.reassemble(df, keep="n", emit="turns").collect(), key=lambda r: r["n"])
    assert [f.name for f in cs_spark.turn_schema().fields] == [name for name, _ in cs_spark.TURN_COLUMNS]
    by_line = {r["stream"]: r for r in expected}
    assert len(rows) == len(bodies)  # one row per input row, null and empty bodies too
    for row in rows:
        record = by_line.get(row["n"])
        if record is None:  # a null body: no record in the log's run (its line has no body)
            assert row["response"] is None and row["errors"]
            continue
        got = None if row["response"] is None else orjson.loads(row["response"])
        assert (row["format"], row["complete"], got, row["errors"]) == (
            record["format"], record["complete"], record["response"], record["errors"])


def test_turns_refuse_an_unknown_emit_and_a_clashing_column(spark):
    df = spark.createDataFrame([("x", "data: [DONE]\n\n")], "response string, body string")
    with pytest.raises(ValueError, match="unknown emit"):
        cs_spark.reassemble(df, emit="rows")
    with pytest.raises(ValueError, match="clash"):
        cs_spark.reassemble(df, keep="response", emit="turns")
