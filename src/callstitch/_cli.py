"""The command line: `callstitch reassemble [INPUT ...]` prints one JSON line per tool call."""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import time
from typing import Any, BinaryIO

from . import __version__
from ._accumulator import IMPLEMENTATION
from ._batch.run import CONTAINERS, Batch
from ._batch.sources import STDIN, expand
from ._batch.turns import EMITS
from ._formats import registry
from ._limits import UNLIMITED, Limits
from ._batch.progress import Progress

_DESCRIPTION = """\
Read captured streamed LLM responses and print one JSON line per tool call:

  {"source": PATH, "stream": N, "choice": C, "index": I, "id": ..., "name": ...,
   "kind": "function" | "custom", "arguments": {...} | "text" | null,
   "error": null | "message", "quirks": [...]}

plus "raw_arguments" (the text as received) when the arguments did not parse,
and "reason" with it when they are nested too deep (over 500 levels) to write.
With --emit turns, one line per stream instead: {"source", "stream", "format",
"complete", "response": the provider's own non-streamed response, "errors": [...]}
(and "request" with --request-field). With --emit chat-messages (JSONL logs of
OpenAI chat, --request-field naming each line's request): one line per choice of
each clean stream, {"messages": [...the request's, the assistant's], "tools": [...]},
the OpenAI fine-tuning shape; a cut or failed stream is reported, not written.

Inputs: files, directories (walked recursively; regular files named *.sse, *.txt,
*.ndjson, *.jsonl, *.eventstream, *.har, *.log, *.stream, *.bin, compressed or not;
links to directories are not followed, and a file met twice is read once), glob
patterns (quote them: '**' recurses) and '-' for standard input (the default). A FIFO
named explicitly is read as a stream: callstitch reassemble <(zcat day.sse.gz).
A file may hold:
  - one response body, or several back to back: SSE, NDJSON, the raw AWS event
    stream, or a JSON array (Gemini without alt=sse). Responses are cut at each one's
    terminator ([DONE], message_stop, response.completed/.failed/.incomplete, Cohere
    message-end, Ollama "done":true, Bedrock messageStop and its metadata event, Gemini's
    finishReason chunk or a new responseId, a JSON array's closing ]); the format of the first response decides how. "stream" counts the
    responses of a file from 0.
  - a JSONL log with one captured response per line (--field names where the body is;
    a string holding the raw body, or a list of chunk objects). "stream" is the
    0-based line number. Without --field, a log is reported once, naming the path
    where its bodies are.
  - a HAR export: the event-stream / NDJSON / eventstream responses of its entries
    (base64 bodies too); other entries are skipped. "stream" is the entry's index.
gzip, zstandard, bzip2 and xz files are read decompressed, recognised by their first
bytes (zstandard needs `pip install 'callstitch[zstd]'`); a damaged or cut archive is
read up to the damage, which is reported with its offset in the decompressed bytes.

Work is spread over worker processes (-j); the output is the same, in the same order,
whatever their number. Big files are read in blocks and cut into pieces at response
boundaries, so memory stays bounded however large the input.

Problems (an unreadable file, a corrupt archive, a line that is not JSON, a stream or
call with errors, a file that shrinks while read, a worker process that dies) are
reported on standard error with the source and position, and the run goes on. At
the end a summary goes to standard error; a progress bar too, while it runs, when
standard error is a terminal.

Exit status: 0 when everything was clean, 1 when any input, stream or call had an
error (or a worker process died), 2 on a usage error, 3 when the output could not be
written (a full disk, a directory that does not exist)."""

_EPILOG = """\
examples:
  callstitch reassemble examples/openai_parallel_calls.sse
  callstitch reassemble captures/ -o calls.jsonl            # a whole tree, every core
  callstitch reassemble 'logs/**/*.sse.gz' -j 4 --quiet
  zcat day.ndjson.gz | callstitch reassemble - --format ollama
  callstitch reassemble gateway.jsonl --field response.body  # one response per line
  callstitch reassemble session.har
  callstitch reassemble captures/ --output-format parquet -o calls.parquet
  callstitch reassemble captures/ --emit turns -o turns.jsonl   # a record per stream
  callstitch reassemble gateway.jsonl --field response.body --request-field request \
      --emit chat-messages -o train.jsonl                         # fine-tuning data
  callstitch reassemble big.sse | head                        # ends quietly"""


def _problem_printer(stream: Any) -> Any:
    def report(source: str, unit: str, number: int | None, offset: int | None, kind: str, message: str) -> None:
        where = []
        if number is not None:
            where.append(f"line {number + 1}" if unit == "line" else f"{unit} {number}")
        if offset is not None:
            where.append(f"byte {offset}")
        place = f" ({', '.join(where)})" if where else ""
        text = message if kind in ("more", "unreadable") or message.startswith(kind) else f"{kind}: {message}"
        stream.write(f"callstitch: {source}{place}: {text}\n")

    return report


def _summary_text(summary: Any, elapsed: float) -> str:
    mb = summary.bytes / 1e6
    rate = mb / elapsed if elapsed > 0 else 0.0
    parts = [f"{summary.sources} source{'s' * (summary.sources != 1)}",
             f"{summary.streams} stream{'s' * (summary.streams != 1)}",
             f"{summary.calls} call{'s' * (summary.calls != 1)}",
             f"{mb:.1f} MB in {elapsed:.2f} s ({rate:.1f} MB/s)"]
    text = "callstitch: " + ", ".join(parts)
    if summary.errors:
        text += "; errors: " + ", ".join(f"{n} {kind}" for kind, n in summary.errors.most_common())
    else:
        text += "; no errors"
    if summary.quirks:
        text += "; quirks: " + ", ".join(f"{n} {name}" for name, n in summary.quirks.most_common())
    if summary.incomplete:
        text += f"; {summary.incomplete} stream{'s' * (summary.incomplete != 1)} without a terminator"
    return text


class _ParquetSink:
    """Write records as Parquet row groups (arguments as a JSON string column)."""

    _ROWS = 65536

    def __init__(self, target: str | BinaryIO) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self.schema = self._schema(pa)
        self._writer = pq.ParquetWriter(target, self.schema)
        self._cols: dict[str, list] = {name: [] for name in self.schema.names}
        self.nulled = 0  # calls whose choice or index an int64 column cannot hold (written as null)

    @staticmethod
    def _schema(pa: Any) -> Any:
        return pa.schema([
            ("source", pa.string()), ("stream", pa.int64()), ("choice", pa.int64()), ("index", pa.int64()),
            ("id", pa.string()), ("name", pa.string()), ("kind", pa.string()), ("arguments", pa.string()),
            ("error", pa.string()),
            ("quirks", pa.list_(pa.string())), ("raw_arguments", pa.string()), ("reason", pa.string()),
        ])

    def write(self, chunk: bytes) -> None:
        from ._records import past_int64, read_records, to_json

        cols = self._cols
        for r in read_records(chunk):
            args = r["arguments"]
            cols["source"].append(r["source"])
            cols["stream"].append(r["stream"])
            reason, past = r.get("reason"), past_int64(r["choice"], r["index"])
            if past:  # written as null, and said so
                self.nulled += 1
                notes = "; ".join(f"{what} {value} does not fit Parquet's int64: written as null"
                                  for what, value in past.items())
                reason = notes if reason is None else f"{reason}; {notes}"
            cols["choice"].append(None if "choice" in past else r["choice"])
            cols["index"].append(None if "index" in past else r["index"])
            cols["id"].append(r["id"])
            cols["name"].append(r["name"])
            cols["kind"].append(r["kind"])
            # The line was written by _records, so these arguments can be written again.
            cols["arguments"].append(None if args is None else to_json(args).decode())
            cols["error"].append(r["error"])
            cols["quirks"].append(r["quirks"])
            cols["raw_arguments"].append(r.get("raw_arguments"))
            cols["reason"].append(reason)
        if len(cols["source"]) >= self._ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._cols["source"]:
            try:
                table = self._pa.Table.from_pydict(self._cols, schema=self.schema)
            except (self._pa.ArrowInvalid, UnicodeError):  # a lone surrogate: Parquet's strings are UTF-8
                from ._records import utf8_text

                table = self._pa.Table.from_pydict({k: utf8_text(v) for k, v in self._cols.items()},
                                                   schema=self.schema)
            self._writer.write_table(table)
            self._cols = {name: [] for name in self.schema.names}

    def close(self) -> None:
        self._flush()
        self._writer.close()


class _TurnParquetSink(_ParquetSink):
    """Write --emit turns records as Parquet: the response and the request as JSON string columns."""

    @staticmethod
    def _schema(pa: Any) -> Any:
        return pa.schema([
            ("source", pa.string()), ("stream", pa.int64()), ("format", pa.string()), ("complete", pa.bool_()),
            ("response", pa.large_string()), ("errors", pa.list_(pa.string())), ("request", pa.large_string()),
        ])

    def write(self, chunk: bytes) -> None:
        from ._records import read_records, to_json

        cols = self._cols
        for r in read_records(chunk):
            for name in ("source", "stream", "format", "complete", "errors"):
                cols[name].append(r[name])
            for name in ("response", "request"):  # written by _records, so writable again
                value = r.get(name)
                cols[name].append(None if value is None else to_json(value).decode())
        if len(cols["source"]) >= self._ROWS:
            self._flush()


EXIT_OUTPUT = 3  # the output could not be written (1: the data had errors; 2: usage)

_FORMAT_OF_SUFFIX = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl",
                     ".ndjson": "jsonl"}
# Suffixes that promise something neither writer makes: JSON lines in them would mislead.
_FOREIGN_SUFFIXES = (".gz", ".gzip", ".zst", ".zstd", ".bz2", ".xz", ".csv", ".tsv", ".arrow", ".feather",
                     ".orc", ".avro", ".xlsx")


def output_format(args: argparse.Namespace) -> str:
    """Return the output format: --output-format if given, else what -o's suffix says (jsonl by default).

    Raises ValueError for a suffix that names a format callstitch does not write.
    """
    if args.output_format:
        return args.output_format
    suffix = os.path.splitext(args.output or "")[1].lower()
    if suffix in _FORMAT_OF_SUFFIX:
        return _FORMAT_OF_SUFFIX[suffix]
    if suffix in _FOREIGN_SUFFIXES:
        raise ValueError(f"cannot write {suffix[1:]} ({args.output!r}): name --output-format jsonl or parquet, "
                         "or pick a .jsonl or .parquet name (compress the output with a pipe: | gzip > ...)")
    return "jsonl"


class _OutputError(Exception):
    """The output could not be written."""


def _guarded(fn: Any) -> Any:
    """Wrap a write or close so that its failures (a full disk, say) tell themselves from the input's."""
    def call(*a: Any) -> Any:
        try:
            return fn(*a)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputError(exc.strerror or str(exc)) from None
    return call


def _open_output(args: argparse.Namespace, fmt: str) -> tuple[Any, Any, Any]:
    """Return (write, close, the Parquet sink or None) for the output; raise ImportError or _OutputError."""
    if not args.output and sys.stdout is None:  # (started with it closed: >&-)
        raise _OutputError("it is closed")
    target: Any = args.output if args.output else sys.stdout.buffer
    try:
        if fmt == "parquet":
            sink: Any = (_TurnParquetSink if args.emit == "turns" else _ParquetSink)(target)
            return _guarded(sink.write), _guarded(sink.close), sink
        out: BinaryIO = open(target, "wb") if args.output else target
    except OSError as exc:
        raise _OutputError(exc.strerror or str(exc)) from None
    return _guarded(out.write), _guarded(out.close if args.output else out.flush), None


def _release_stdout() -> None:
    """Point standard output at /dev/null, so that Python's flush at exit has nothing left to fail on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


_STDOUT_FILE = "/dev/stdout"  # where it is a file, that file (Linux, macOS); elsewhere not there: nothing skipped


def _check_not_an_input(output: str | None, inputs: list[str]) -> None:
    """Raise ValueError when -o names a file that is an input (named, globbed or walked): opening it would empty it.

    A file -o makes anew is no input: the run skips it where a directory or glob meets it.
    """
    if not output:
        return
    try:
        st = os.stat(output)
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(st.st_mode):
        return  # (/dev/null, a FIFO: writing destroys nothing)
    for path, problem in expand(inputs or [STDIN]):
        if problem is not None or path == STDIN:
            continue
        try:
            same = os.path.samefile(path, output)
        except (OSError, ValueError):
            continue
        if same:
            raise ValueError(f"-o {output!r} is an input ({path!r}): writing there would destroy it; "
                             "write elsewhere or remove it first")


def reassemble_command(args: argparse.Namespace) -> int:
    """Reassemble every input and write its calls; return the exit status."""
    err = sys.stderr
    quiet = args.quiet
    where = repr(args.output) if args.output else "standard output"
    try:
        fmt = output_format(args)
        _check_emit(args, fmt)
        _check_not_an_input(args.output, args.inputs)
        write, close, sink = _open_output(args, fmt)
    except ValueError as exc:
        err.write(f"callstitch: {exc}\n")
        return 2
    except ImportError:
        err.write("callstitch: --output-format parquet needs pyarrow (pip install 'callstitch[parquet]')\n")
        return 2
    except _OutputError as exc:
        err.write(f"callstitch: cannot write {where}: {exc}\n")
        return EXIT_OUTPUT
    progress = Progress(err) if not quiet and err.isatty() else None
    batch = Batch(args.inputs or ["-"], format=args.format, field=args.field, jobs=args.jobs,
                  container=args.container, on_problem=_problem_printer(err),
                  on_progress=progress.update if progress is not None else None, limits=_limits(args),
                  emit=args.emit, request_field=args.request_field,
                  written=args.output or _STDOUT_FILE)  # (standard output redirected into a walked directory)
    started = time.perf_counter()
    try:
        for chunk in batch.chunks():
            if progress is not None:
                progress.close()
            write(chunk)
        close()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): end quietly, and keep Python from complaining at exit.
        _release_stdout()
        return 0
    except _OutputError as exc:
        if not args.output:
            _release_stdout()
        err.write(f"callstitch: cannot write {where}: {exc}; the run is stopped\n")
        return EXIT_OUTPUT
    finally:
        if progress is not None:
            progress.close()
    nulled = getattr(sink, "nulled", 0)
    if nulled:  # said even with --quiet: the file holds less than the records did
        err.write(f"callstitch: {nulled} call{'' if nulled == 1 else 's'}'s choice or index does not fit "
                  "Parquet's int64: written as null (its reason says so)\n")
    if not quiet:
        err.write(_summary_text(batch.summary, time.perf_counter() - started) + "\n")
    return 1 if batch.summary.failed or nulled else 0


def _check_emit(args: argparse.Namespace, fmt: str) -> None:
    """Raise ValueError for --emit and --request-field options that do not go together."""
    if args.request_field and not args.field:
        raise ValueError("--request-field reads JSONL logs: name where each line's body is with --field too")
    if args.emit == "chat-messages":
        if not args.request_field:
            raise ValueError("--emit chat-messages needs each line's request: name it with --request-field")
        if fmt == "parquet":
            raise ValueError("--emit chat-messages writes fine-tuning JSON lines: use -o with a .jsonl name")


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (all cores) or more")
    return n or (os.cpu_count() or 1)


_LIMIT_OPTIONS = (
    ("call_bytes", "64M", "argument bytes of one call"),
    ("stream_bytes", "256M", "argument and text bytes of one stream, and ids and names past 256 characters"),
    ("calls", "4096", "tool calls in one stream"),
    ("choices", "128", "choices in one stream"),
    ("event_bytes", "64M", "bytes of one SSE line or event, NDJSON line or event-stream message"),
)
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _amount(text: str) -> int:
    """Parse a limit: a whole number, optionally with K, M or G (binary units)."""
    scale = _UNITS.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale != 1 else text
    try:
        value = int(digits) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 64M, 1G)") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 (no limit) or more")
    if value > UNLIMITED:
        raise argparse.ArgumentTypeError(f"{text!r} is over 2**62 bytes: give 0 for no limit")
    return value


def _limits(args: argparse.Namespace) -> Limits:
    """Return the Limits the options ask for; options not given keep the defaults."""
    given = {name: getattr(args, f"max_{name}") for name, _, _ in _LIMIT_OPTIONS
             if getattr(args, f"max_{name}") is not None}
    return Limits(**{name: value or None for name, value in given.items()})


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the command line."""
    parser = argparse.ArgumentParser(prog="callstitch", description="Reassemble streamed LLM tool calls.")
    parser.add_argument("--version", action="version",
                        version=f"callstitch {__version__} ({IMPLEMENTATION} implementation)")
    sub = parser.add_subparsers(dest="command", required=True)
    re_ = sub.add_parser("reassemble", help="print the tool calls of captured streamed responses as JSON lines",
                         description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    re_.add_argument("inputs", nargs="*", metavar="INPUT",
                     help="files, directories, glob patterns, or '-' for standard input (the default)")
    re_.add_argument("--format", default="auto", choices=registry.names(),
                     help="the wire format (default: %(default)s: detected from each source's first response)")
    re_.add_argument("--field", metavar="PATH",
                     help="read inputs as JSONL logs, the body of each line at this dotted path "
                          "(e.g. response.body); a string (the raw body) or a list of chunk objects")
    re_.add_argument("--container", default="auto", choices=CONTAINERS,
                     help="how to read the inputs: body (responses back to back), jsonl, har; default: "
                          "*.har files as HAR, JSONL with --field, else sniffed (HAR or body)")
    re_.add_argument("-j", "--jobs", type=_jobs, default=os.cpu_count() or 1, metavar="N",
                     help="worker processes (default: all %(default)s cores; 0 also means all; at most 4 per core)")
    re_.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    re_.add_argument("--output-format", choices=("jsonl", "parquet"),
                     help="jsonl or parquet (needs pyarrow; arguments as a JSON string column); default: "
                          "from -o's suffix (.parquet: parquet; .jsonl, .json, .ndjson or other: jsonl)")
    re_.add_argument("--emit", default="calls", choices=EMITS,
                     help="a record per tool call (the default), per stream's whole turn (turns), or OpenAI "
                          "fine-tuning lines of chat logs (chat-messages, with --request-field)")
    re_.add_argument("--request-field", metavar="PATH",
                     help="with --field: where each log line holds its request (e.g. request.body); joined "
                          "into --emit turns records and needed by --emit chat-messages")
    re_.add_argument("-q", "--quiet", action="store_true",
                     help="no progress bar and no summary (problems are still reported)")
    limits = re_.add_argument_group(
        "limits", "bound what one stream may hold (README: Limits and safety); sizes take K, M, G; 0: no limit")
    for name, default, what in _LIMIT_OPTIONS:
        limits.add_argument(f"--max-{name.replace('_', '-')}", dest=f"max_{name}", type=_amount, metavar="N",
                            help=f"{what} (default {default})")
    re_.set_defaults(run=reassemble_command)
    return parser


class _Terminated(BaseException):
    """SIGTERM, raised where the run stands (as Ctrl-C raises KeyboardInterrupt) so that its cleanup runs."""


def _stop_on_sigterm() -> Any:
    """Make SIGTERM stop the run as Ctrl-C does; return the handler it replaced (None: none replaced).

    Python's default ends the process at once: the temporary files of the records a run holds
    (Batch.chunks) stayed behind, under a job scheduler's every stop. Workers forked from here
    inherit the handler: they die of the signal, as before.
    """
    ours = os.getpid()

    def stop(signum: int, frame: Any) -> None:
        if os.getpid() != ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:  # main() called from a thread other than the main one: signals are not its to set
        return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    args = build_parser().parse_args(argv)
    if getattr(args, "output_format", None) == "parquet" and not args.output and sys.stdout.isatty():
        sys.stderr.write("callstitch: --output-format parquet writes binary; name a file with -o\n")
        return 2
    replaced = _stop_on_sigterm()
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        return 128 + signal.SIGTERM
    finally:
        if replaced is not None:
            signal.signal(signal.SIGTERM, replaced)


if __name__ == "__main__":
    sys.exit(main())
