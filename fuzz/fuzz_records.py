"""Coverage-guided fuzzing of the record writer (atheris): every call gives one line of JSON.

Each input gives a call's id, name, quirks and arguments (JSON text read by the standard library:
integers beyond 64 bits, lone surrogates; then nested as deep as the input asks). The writer
every output path shares (callstitch._records) must turn it into one UTF-8 line of JSON that reads
back to the call, its arguments exactly, or, when they cannot be written, null with the raw text
and a reason; and callstitch.spark's arguments column must decide the same way. Run it (see
fuzz/README.md):

    python fuzz/fuzz_records.py fuzz/corpus-records -max_total_time=600
"""

import json
import sys

import atheris

with atheris.instrument_imports(include=["callstitch"]):
    from callstitch._records import arguments_json, call_line, read_record
    from callstitch._results import ToolCall


def parse(text):
    try:
        return json.loads(text, parse_constant=lambda name: None)
    except (ValueError, RecursionError):
        return None


def text_of(fdp, size):
    """Return text of up to size characters, lone surrogates included.

    A high and a low surrogate side by side are joined into the character they make: JSON cannot
    tell the two apart (both are written as the same two escapes), so no writer could.
    """
    return fdp.ConsumeUnicode(size).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    depth = fdp.ConsumeIntInRange(0, 1200)
    as_list = fdp.ConsumeBool()
    call_id = text_of(fdp, fdp.ConsumeIntInRange(0, 40)) if fdp.ConsumeBool() else None
    name = text_of(fdp, fdp.ConsumeIntInRange(0, 40))
    quirks = tuple(text_of(fdp, 8) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    text = text_of(fdp, fdp.remaining_bytes())
    arguments = parse(text)
    for _ in range(depth):
        arguments = [arguments] if as_list else {"a": arguments}
    call = ToolCall(call_id, name, 0, 0, arguments, text, None, quirks)

    line, reason = call_line(call)
    if not line.endswith(b"\n") or line.count(b"\n") != 1:
        raise AssertionError(f"not one line: {line[:200]!r}")
    line.decode("utf-8")  # strict: what any reader takes
    record = read_record(line)
    if (record["id"], record["name"], record["quirks"]) != (call_id, name, list(quirks)):
        raise AssertionError(f"the call's fields changed: {record!r}")
    column, column_reason = arguments_json(arguments)
    if (reason is None) != (column_reason is None):
        raise AssertionError(f"the record and the Spark column decide differently: {reason!r} / {column_reason!r}")
    if reason is None:
        if record["arguments"] != arguments and arguments == arguments:  # (a NaN is never equal to itself)
            raise AssertionError("the arguments read back differently")
        if json.loads(column) != record["arguments"]:
            raise AssertionError("the Spark column differs from the record")
    elif record["arguments"] is not None or record["raw_arguments"] != text or record.get("reason") != reason:
        raise AssertionError(f"a call too deep to write lost its text or reason: {reason!r}")


def main():
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
