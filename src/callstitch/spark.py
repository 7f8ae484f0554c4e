"""Reassemble captured streams on Apache Spark: one row per tool call, with ``mapInArrow``.

```python
from callstitch.spark import reassemble

logs = spark.read.parquet("s3://gateway-logs/2025/")       # one captured response per row
calls = reassemble(logs, body_col="response_body", keep=["request_id", "ts"])
calls.write.parquet("s3://gateway-logs-calls/2025/")
```

The work runs in Spark's own Python workers, one Arrow record batch at a time: each body is
handed to its own Accumulator as a slice of the batch's buffer (no copy, no Python object per
body), and the output columns are built per batch. Nothing of callstitch's own schedules work;
any cluster with PySpark >= 3.4, pyarrow and callstitch installed on the workers runs it.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Iterable, Iterator


try:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(f"callstitch.spark needs pyspark and pyarrow: pip install 'callstitch[spark]' ({exc})") from None

from ._accumulator import Accumulator
from ._exactjson import loads_exact
from ._formats.dispatch import check_format
from ._limits import Limits
from ._batch.turns import response_json
from ._records import arguments_json, past_int64, raw_text, utf8_text

__all__ = ["reassemble", "CALL_COLUMNS", "call_schema", "TURN_COLUMNS", "turn_schema"]

# The columns reassemble() adds after the kept ones: the CLI's record fields (``stream`` aside,
# which the kept columns replace), the stream's format, and the stream's own errors.
CALL_COLUMNS = (
    ("choice", T.LongType()),
    ("index", T.LongType()),
    ("id", T.StringType()),
    ("name", T.StringType()),
    ("kind", T.StringType()),               # "function", or "custom" (arguments then holds the input text as JSON)
    ("arguments", T.StringType()),          # the parsed arguments as compact JSON text; null when invalid
    ("error", T.StringType()),              # the call's ArgumentsError as text, or null
    ("quirks", T.ArrayType(T.StringType())),
    ("raw_arguments", T.StringType()),      # the text as received, when arguments is null
    ("reason", T.StringType()),             # why arguments is null for a call that parsed (nested too deep)
    ("format", T.StringType()),             # the stream's wire format (as detected with "auto")
    ("stream_errors", T.ArrayType(T.StringType())),
)
_NAMES = tuple(name for name, _ in CALL_COLUMNS)

# The columns reassemble(emit="turns") adds after the kept ones: one row per input row.
TURN_COLUMNS = (
    ("format", T.StringType()),             # the stream's wire format (as detected with "auto")
    ("complete", T.BooleanType()),          # a terminator was seen
    ("response", T.StringType()),           # Result.to_response() as JSON text; null when there is no turn
    ("errors", T.ArrayType(T.StringType())),  # the stream's errors and its calls', as text
)
_TURN_NAMES = tuple(name for name, _ in TURN_COLUMNS)
_BODY = "__callstitch_body"   # the body column's name inside the job (kept columns keep theirs)

# How the body column is read in the workers.
_RAW = "raw"                   # string or binary: the whole response body
_CHUNKS = "chunks"             # array<string>: one chunk (JSON text) per element
_CHUNKS_JSON = "chunks-json"   # array<struct | map | ...>, turned into one JSON array text by Spark


def call_schema(keep_fields: Iterable[T.StructField] = ()) -> T.StructType:
    """Return the schema of reassemble()'s output: the kept columns, then CALL_COLUMNS."""
    return T.StructType(list(keep_fields) + [T.StructField(name, kind, nullable=True) for name, kind in CALL_COLUMNS])


def turn_schema(keep_fields: Iterable[T.StructField] = ()) -> T.StructType:
    """Return the schema of reassemble(emit="turns")'s output: the kept columns, then TURN_COLUMNS."""
    return T.StructType(list(keep_fields) + [T.StructField(name, kind, nullable=True) for name, kind in TURN_COLUMNS])


def reassemble(df: Any, body_col: str = "body", format: str = "auto", limits: Limits | None = None,
               keep: Iterable[str] | str | None = None, emit: str = "calls") -> Any:
    """Reassemble the tool calls of a DataFrame of captured responses; return one row per call.

    ``df`` holds one captured response per row. ``body_col`` is the body: a string or binary
    column with the raw response (SSE, NDJSON or the binary AWS event stream), or an array
    column of chunk objects (JSON text, structs or maps), fed one by one with
    ``Accumulator.feed_chunk``. ``format`` is a wire format name or "auto" (detected per row);
    ``limits`` bounds each stream (callstitch.Limits). ``keep`` names the input columns to carry
    into every output row (a row's key: they play the part of the CLI's ``stream``); None, the
    default, keeps every column but the body.

    Each output row is one tool call, with the kept columns, then ``choice``, ``index``, ``id``,
    ``name``, ``kind``, ``arguments`` (JSON text), ``error``, ``quirks``, ``raw_arguments`` (set when
    ``arguments`` is null), ``reason`` (why ``arguments`` is null for a call that parsed: nested
    deeper than callstitch writes as JSON), as in the CLI's records, then the stream's
    ``format`` and its ``stream_errors`` (each as text, on every row of the stream). A row whose stream had errors
    but no calls, or whose body is null or not usable, gives one row with null call fields and
    the error text in ``stream_errors``: bad bodies never fail the job. A row with neither calls
    nor errors gives no output row.

    With ``emit="turns"``, each output row is one input row's whole turn instead: the kept
    columns, then ``format``, ``complete``, ``response`` (Result.to_response() as JSON text, the
    provider's own non-streamed response; null for a body of no known format) and ``errors``
    (the stream's and its calls', as text) — the records of the CLI's ``--emit turns``.
    """
    check_format(format)
    if emit not in ("calls", "turns"):
        raise ValueError(f"unknown emit {emit!r}; known: calls, turns")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be a callstitch.Limits, not {type(limits).__name__}")
    schema = df.schema
    names = schema.fieldNames()
    if body_col not in names:
        raise ValueError(f"no column {body_col!r} in the DataFrame; its columns: {', '.join(names)}")
    case_sensitive = df.sparkSession.conf.get("spark.sql.caseSensitive", "false").lower() == "true"
    keep = _kept(keep, names, body_col, _NAMES if emit == "calls" else _TURN_NAMES, case_sensitive)

    body_type = schema[body_col].dataType
    body = _col(body_col)
    if isinstance(body_type, (T.StringType, T.BinaryType)):
        kind = _RAW
    elif isinstance(body_type, T.ArrayType) and isinstance(body_type.elementType, T.StringType):
        kind = _CHUNKS
    elif isinstance(body_type, T.ArrayType):
        # Spark writes the chunks as JSON on the JVM side (leaving out null fields, as the
        # original JSON most likely did); the worker reads them back (loads_exact).
        kind, body = _CHUNKS_JSON, F.to_json(body)
    else:
        raise TypeError(f"the column {body_col!r} is {body_type.simpleString()}; expected a body (string or "
                        "binary) or an array of chunks (of JSON strings, structs or maps)")

    out_schema = (call_schema if emit == "calls" else turn_schema)([schema[name] for name in keep])
    selected = df.select(*[_col(name) for name in keep], body.alias(_BODY))
    work = functools.partial(_map_batches, kind, format, limits, len(keep), emit)
    with warnings.catch_warnings():
        # mapInArrow asks for pandas only to check it is there; its version does not matter here.
        warnings.filterwarnings("ignore", message=".*does not yet fully support pandas", category=FutureWarning)
        return selected.mapInArrow(work, out_schema)


def _kept(keep: Iterable[str] | str | None, names: list[str], body_col: str,
          taken: tuple[str, ...] = _NAMES, case_sensitive: bool = False) -> list[str]:
    """Return the input columns to carry into the output rows; raise ValueError for a bad one."""
    given = keep is not None
    if keep is None:
        keep = [n for n in names if n != body_col]
    elif isinstance(keep, str):
        keep = [keep]
    else:
        keep = list(keep)
    # Spark matches names regardless of case unless spark.sql.caseSensitive is set: "ID" beside
    # the output's "id" would make every later reference to either ambiguous.
    fold = (lambda n: n) if case_sensitive else str.lower
    output = {fold(n): n for n in taken}
    for name in keep:
        if name not in names:
            raise ValueError(f"keep names {name!r}, which is not a column of the DataFrame; "
                             f"its columns: {', '.join(names)}")
        if fold(name) in output:
            raise ValueError(f"the column {name!r} would clash with the output column {output[fold(name)]!r}; rename "
                             f"it first (df.withColumnRenamed({name!r}, 'request_{name}')) or leave it out of keep")
    if len({fold(n) for n in keep}) != len(keep):
        if given:
            raise ValueError(f"keep names a column twice: {keep!r}")
        raise ValueError(f"the DataFrame has two columns of one name, which Spark cannot tell apart: {keep!r}; "
                         "rename one, or name the columns to carry with keep")
    return keep


def _col(name: str) -> Any:
    """Return the top-level column of that name (a dot in it is part of the name)."""
    return F.col("`" + name.replace("`", "``") + "`")


# -- the workers' side -------------------------------------------------------------------------

def _map_batches(kind: str, format: str, limits: Limits | None, nkeep: int, emit: str,
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Turn each input batch (kept columns, then the body) into batches of call rows (or turn rows)."""
    for batch in batches:
        yield from _calls(batch, kind, format, limits, nkeep, _Rows if emit == "calls" else _TurnRows)


def _raw_bodies(arr: pa.Array) -> Iterator[memoryview | None]:
    """Yield each body of a string or binary Arrow array as a slice of its buffer (None for null)."""
    n = len(arr)
    _, offsets, data = arr.buffers()
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    offs = pa.Array.from_buffers(pa.int64() if large else pa.int32(), n + 1, [None, offsets],
                                 offset=arr.offset).to_pylist()
    view = memoryview(data) if data is not None else memoryview(b"")
    if arr.null_count:
        for valid, a, b in zip(arr.is_valid().to_pylist(), offs, offs[1:]):
            yield view[a:b] if valid else None
    else:
        for a, b in zip(offs, offs[1:]):
            yield view[a:b]


def _array(values: list, type: pa.DataType) -> pa.Array:
    """Return a string (or list of strings) column; text that is not UTF-8 gets U+FFFD in its place."""
    try:
        return pa.array(values, type)
    except (pa.ArrowInvalid, UnicodeError):
        # A lone surrogate, which the fallback JSON parser lets through in an id, a name or an
        # error excerpt, cannot go into Arrow's UTF-8; replace it rather than fail the task.
        return pa.array([utf8_text(v) for v in values], type)


# An output batch is sent on once its text reaches about this many bytes. A stream's errors
# repeat on every call row and a kept column on every call of its row, so one body of under a
# megabyte can make gigabytes of rows: past what one Arrow string column holds (2 GiB), and
# more than a worker should hold at once. The margin below 2 GiB covers text counted in
# characters of up to 4 bytes and kept columns estimated from their average.
_BATCH_BYTES = 64 << 20


def _calls(batch: pa.RecordBatch, kind: str, format: str, limits: Limits | None, nkeep: int,
           rows: Any) -> Iterator[pa.RecordBatch]:
    """Reassemble every body of one batch; yield its rows, made by rows (a class), in batches of bounded size."""
    body = batch.column(nkeep)
    bodies: Iterable[Any] = _chunk_lists(body) if kind == _CHUNKS else _raw_bodies(body)
    # Strings go out as Spark sends them in: large ones when it is set to (useLargeVarTypes).
    sent = body.type.value_type if kind == _CHUNKS else body.type
    large = pa.types.is_large_binary(sent) or pa.types.is_large_string(sent)
    out = rows(batch, nkeep, pa.large_string() if large else pa.string(), _kept_bytes(batch, nkeep))
    for i, data in enumerate(bodies):
        if data is None:
            out.error_row(i, None, ["no body: the body column is null"])
        else:
            try:
                result = _reassembled(data, kind, format, limits)
            except (TypeError, ValueError) as exc:  # a chunk that is not JSON or not an object
                out.error_row(i, None, [f"unexpected shape: {exc}"])
            except Exception as exc:  # noqa: BLE001 - one body must never fail a job of millions
                out.error_row(i, None, [f"internal error: {type(exc).__name__}: {exc}"])
            else:
                at = out.add(i, result)
                while at is not None:  # a stream whose rows fill more than a batch
                    yield out.flush()
                    at = out.add(i, result, at)
        if out.size >= _BATCH_BYTES:
            yield out.flush()
    if out.rows:
        yield out.flush()


def _chunk_lists(arr: pa.Array) -> list[list | None]:
    """Return each row's chunks (JSON texts) of an array<string> Arrow array, None for a null row.

    A Spark string may hold bytes that are not UTF-8 (a cast from binary does not check them);
    such a chunk is handed over as its bytes, which feed_chunk reports as a malformed chunk,
    rather than failing the conversion of the whole batch.
    """
    try:
        return arr.to_pylist()
    except UnicodeDecodeError:
        pass
    text = arr.type.value_type
    binary = pa.large_binary() if pa.types.is_large_string(text) else pa.binary()
    lists = arr.cast(pa.large_list(binary) if pa.types.is_large_list(arr.type) else pa.list_(binary)).to_pylist()
    return [None if chunks is None else [_text(c) for c in chunks] for chunks in lists]


def _text(chunk: bytes | None) -> str | bytes | None:
    """Return a chunk's bytes as text when they are UTF-8, else the bytes themselves."""
    if chunk is None:
        return None
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError:
        return chunk


def _kept_bytes(batch: pa.RecordBatch, nkeep: int) -> list[int]:
    """Return about how many bytes each input row's kept columns take, repeated in each of its output rows."""
    total: Any = None
    average = 0
    for k in range(nkeep):
        column = batch.column(k)
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) or \
                pa.types.is_large_binary(kind):
            lengths = pc.binary_length(column).cast(pa.int64()).fill_null(0)
            total = lengths if total is None else pc.add(total, lengths)
        elif batch.num_rows:
            # Other types by their average: fixed-width ones are what they are; a nested one
            # with long text in a few rows is underestimated, which the margin absorbs.
            average += column.nbytes // batch.num_rows
    if total is None:
        return [average] * batch.num_rows
    return (pc.add(total, average) if average else total).to_pylist()


def _reassembled(data: Any, kind: str, format: str, limits: Limits | None) -> Any:
    """Return the Result of one body: raw bytes, or its chunks (a list, or JSON text of one)."""
    acc = Accumulator(format, limits)
    if kind == _RAW:
        acc.feed(data)
    else:
        chunks = data if kind == _CHUNKS else loads_exact(data)
        for chunk in chunks:
            acc.feed_chunk(chunk)
    return acc.finalize()


class _Batch:
    """What the rows of one input batch share: the input, the string type, the size so far."""

    def __init__(self, batch: pa.RecordBatch, nkeep: int, string_type: pa.DataType, kept: list[int]) -> None:
        self.batch = batch
        self.nkeep = nkeep
        self.string_type = string_type
        self.kept = kept               # about how many bytes each input row's kept columns take
        self._start()

    def _start(self) -> None:
        """Begin an output batch (again, after a flush): no rows yet (each subclass adds its columns)."""
        self.rows: list[int] = []      # the input row of each output row
        self.size = 0                  # about how many bytes the rows so far take

    def _kept_columns(self) -> list[pa.Array]:
        take = pa.array(self.rows, pa.int32())
        return [self.batch.column(k).take(take) for k in range(self.nkeep)]


class _Rows(_Batch):
    """The call rows of one batch, column by column, sent on in batches of bounded size."""

    def _start(self) -> None:
        super()._start()
        self.choice: list = []
        self.index: list = []
        self.ids: list = []
        self.names: list = []
        self.kinds: list = []
        self.arguments: list = []
        self.error: list = []
        self.quirks: list = []
        self.raw: list = []
        self.reasons: list = []
        self.formats: list = []
        self.stream_errors: list = []

    def error_row(self, i: int, fmt: str | None, errors: list[str]) -> None:
        """Add a row with no call: a stream's errors (or why a body could not be read)."""
        self.rows.append(i)
        for col in (self.choice, self.index, self.ids, self.names, self.kinds, self.arguments, self.error, self.quirks,
                    self.raw, self.reasons):
            col.append(None)
        self.formats.append(fmt)
        self.stream_errors.append(errors)
        self.size += self.kept[i] + sum(map(len, errors)) + 64

    def add(self, i: int, result: Any, start: int = 0) -> int | None:
        """Add a row per call of input row i's Result from call start on, one error row if it had errors and no calls.

        Return the number of the first call not added when the batch filled up first (flush,
        then add again from there), else None.
        """
        calls = result.tool_calls
        errors = [str(e) for e in result.errors]
        if not calls:
            if errors:
                self.error_row(i, result.format, errors)
            return None
        # A choice is kept as sent, and a bigint holds no integer past 64 bits: such a call is
        # written with it null, and the stream's errors say what and whose.
        past = [past_int64(call.choice, call.index) for call in calls]
        errors += [f"{what} {value} does not fit a bigint: written as null (call {call.id!r}, {call.name!r})"
                   for call, numbers in zip(calls, past) for what, value in numbers.items()]
        fmt = result.format
        # What every row of the stream repeats; of a call's own fields only the arguments are
        # counted, the others being no longer than the part of the body they came from.
        repeat = self.kept[i] + sum(map(len, errors)) + 64
        for n in range(start, len(calls)):
            call = calls[n]
            self.rows.append(i)
            self.choice.append(None if "choice" in past[n] else call.choice)
            self.index.append(None if "index" in past[n] else call.index)
            self.ids.append(call.id)
            self.names.append(call.name)
            self.kinds.append(call.kind)
            args = call.arguments
            text, reason = (None, None) if args is None else arguments_json(args)
            self.arguments.append(text)
            # A call too deep to write as JSON is kept as the text received, with the reason.
            raw = raw_text(call) if text is None else None
            self.raw.append(raw)
            self.reasons.append(reason)
            self.error.append(None if call.error is None else str(call.error))
            self.quirks.append(list(call.quirks))
            self.formats.append(fmt)
            self.stream_errors.append(errors)
            self.size += repeat + (len(text) if text is not None else len(raw) if raw is not None else 0)
            if self.size >= _BATCH_BYTES and n + 1 < len(calls):
                return n + 1
        return None

    def flush(self) -> pa.RecordBatch:
        """Return the rows so far as a batch (the kept columns of their input rows, then CALL_COLUMNS); start anew."""
        string_type = self.string_type
        strings = pa.list_(string_type)
        columns = self._kept_columns()
        columns += [
            pa.array(self.choice, pa.int64()), pa.array(self.index, pa.int64()),
            _array(self.ids, string_type), _array(self.names, string_type), _array(self.kinds, string_type),
            _array(self.arguments, string_type),
            _array(self.error, string_type), _array(self.quirks, strings), _array(self.raw, string_type),
            _array(self.reasons, string_type), _array(self.formats, string_type),
            _array(self.stream_errors, strings),
        ]
        self._start()
        return pa.RecordBatch.from_arrays(columns, names=self.batch.schema.names[:self.nkeep] + list(_NAMES))


def _in_the_errors(kind: str, message: str) -> None:
    """Report nothing more: a turn row's problems are already in its errors column."""


class _TurnRows(_Batch):
    """The turn rows of one batch (emit="turns"): one per input row, column by column."""

    def _start(self) -> None:
        super()._start()
        self.formats: list = []
        self.complete: list = []
        self.responses: list = []
        self.errors: list = []

    def error_row(self, i: int, fmt: str | None, errors: list[str]) -> None:
        """Add the row of a body that could not be read: no response, why in its errors."""
        self.rows.append(i)
        self.formats.append(fmt)
        self.complete.append(False)
        self.responses.append(None)
        self.errors.append(errors)
        self.size += self.kept[i] + sum(map(len, errors)) + 32

    def add(self, i: int, result: Any, start: int = 0) -> int | None:
        """Add input row i's turn; return None (one row is never cut: the caller sends on a full batch)."""
        response, texts = response_json(result, _in_the_errors)
        self.rows.append(i)
        self.formats.append(result.format)
        self.complete.append(result.complete)
        self.responses.append(None if response is None else response.decode("utf-8", "surrogatepass"))
        self.errors.append(texts)
        self.size += self.kept[i] + (0 if response is None else len(response)) + sum(map(len, texts)) + 32
        return None

    def flush(self) -> pa.RecordBatch:
        """Return the rows so far as a batch (the kept columns of their input rows, then TURN_COLUMNS); start anew."""
        string_type = self.string_type
        columns = self._kept_columns()
        columns += [_array(self.formats, string_type), pa.array(self.complete, pa.bool_()),
                    _array(self.responses, string_type), _array(self.errors, pa.list_(string_type))]
        self._start()
        return pa.RecordBatch.from_arrays(columns, names=self.batch.schema.names[:self.nkeep] + list(_TURN_NAMES))
