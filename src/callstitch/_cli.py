"""The command line: `callstitch reassemble [FILE ...]` prints one JSON line per tool call."""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO, Iterable

import orjson

from . import __version__
from ._accumulator import IMPLEMENTATION, Accumulator
from ._dispatch import FORMATS

_READ_SIZE = 1 << 16


def _records(source: str, stream: BinaryIO, format: str) -> Iterable[tuple[dict, list]]:
    acc = Accumulator(format=format)
    while True:
        data = stream.read(_READ_SIZE)
        if not data:
            break
        acc.feed(data)
    result = acc.finalize()
    for call in result.tool_calls:
        record = {"source": source, "stream": 0}
        record.update(call.to_dict())
        yield record, result.errors
    if not result.tool_calls:
        yield None, result.errors


def reassemble_command(args: argparse.Namespace) -> int:
    """Reassemble each input and print its calls as JSON lines; return the exit status."""
    out = sys.stdout.buffer
    status = 0
    for path in args.files or ["-"]:
        try:
            handle = sys.stdin.buffer if path == "-" else open(path, "rb")
        except OSError as exc:
            print(f"callstitch: {path}: {exc.strerror}", file=sys.stderr)
            status = 1
            continue
        with handle if path != "-" else _nothing():
            seen_errors: list = []
            for record, errors in _records("<stdin>" if path == "-" else path, handle, args.format):
                seen_errors = errors
                if record is None:
                    continue
                if record["error"] is not None:
                    status = 1
                out.write(orjson.dumps(record) + b"\n")
            for error in seen_errors:
                print(f"callstitch: {path}: {error}", file=sys.stderr)
                status = 1
    out.flush()
    return status


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the command line."""
    parser = argparse.ArgumentParser(prog="callstitch", description="Reassemble streamed LLM tool calls.")
    parser.add_argument("--version", action="version",
                        version=f"callstitch {__version__} ({IMPLEMENTATION} implementation)")
    sub = parser.add_subparsers(dest="command", required=True)
    re_ = sub.add_parser(
        "reassemble", help="print the tool calls of captured streamed responses as JSON lines",
        description="Read captured streamed responses (one whole response body per file; standard input "
                    "when no file is named) and print one JSON line per tool call: source, stream, choice, "
                    "index, id, name, arguments, error, quirks (and raw_arguments when the arguments did "
                    "not parse). Problems are reported on standard error; the exit status is 1 when any "
                    "input had one.",
        epilog="example: callstitch reassemble examples/openai_parallel_calls.sse")
    re_.add_argument("files", nargs="*", metavar="FILE", help="captured response bodies ('-' for stdin)")
    re_.add_argument("--format", default="openai-chat", choices=FORMATS, help="the wire format (default: %(default)s)")
    re_.set_defaults(run=reassemble_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): end quietly.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
