"""The CLI when things around the data fail: a worker process killed, a task that raises, an output
that cannot be written; and the choices it makes from names (-o's suffix, a log without --field).

All of it for real: `python -m callstitch reassemble` in a subprocess, workers killed with SIGKILL,
/dev/full for a full disk.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import textwrap
import time

import orjson
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

EXIT_OUTPUT = 3
# Every test here runs the command line on each twin (the variable reaches the subprocess).
pytestmark = pytest.mark.usefixtures("every_twin")


def cli(*args: str, env: dict | None = None, stdout: int | None = subprocess.PIPE,
        timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], stdout=stdout,
                          stderr=subprocess.PIPE, timeout=timeout, env={**os.environ, **(env or {})})


def records(proc: subprocess.CompletedProcess) -> list[dict]:
    return [orjson.loads(line) for line in proc.stdout.splitlines()]


def write_sources(tmp_path, n: int = 6, responses: int = 40) -> list[str]:
    paths = []
    for i in range(n):
        path = tmp_path / f"capture-{i}.sse"
        path.write_bytes(b"".join(b for b, _ in workload.responses(responses, seed=i)))
        paths.append(str(path))
    return paths


# A fault for the tests, in every process the CLI starts (forked or from a fork server): a worker
# that takes a task of a file named *doomed* kills itself with SIGKILL, as the OOM killer would;
# one of a file named *cursed* raises. A pool worker that ran a task of a file named *torn* is
# killed while it sends the result back, as the kernel lets that happen: a write to a pipe of
# PIPE_BUF bytes or fewer is whole, a longer one may stop partway (here: at half).
# The process that runs the CLI itself is left alone.
SITECUSTOMIZE = textwrap.dedent("""
    import multiprocessing, os, select, signal, struct
    import concurrent.futures.process as pool_process
    from multiprocessing.reduction import ForkingPickler
    import callstitch._batch.worker as batch

    _run_task = batch.run_task
    _sendback_result = pool_process._sendback_result
    _torn = []

    def run_task(task):
        if "cursed" in task.source:
            raise RecursionError("maximum recursion depth exceeded (a test's fault)")
        if "doomed" in task.source and multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        if "torn" in task.source:
            _torn.append(task.source)
        return _run_task(task)

    class _Tearing:
        def __init__(self, queue):
            self.queue = queue

        def put(self, item):
            message = bytes(ForkingPickler.dumps(item))
            frame = struct.pack("!i", len(message)) + message
            with self.queue._wlock:
                os.write(self.queue._writer.fileno(),
                         frame if len(frame) <= select.PIPE_BUF else frame[:len(frame) // 2])
                os.kill(os.getpid(), signal.SIGKILL)

    def sendback_result(result_queue, *args, **kwargs):
        return _sendback_result(_Tearing(result_queue) if _torn else result_queue, *args, **kwargs)

    batch.run_task = run_task
    pool_process._sendback_result = sendback_result
""")


def faulty_env(tmp_path) -> dict:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    src = os.path.dirname(os.path.dirname(os.path.abspath(__import__("callstitch").__file__)))
    return {"PYTHONPATH": os.pathsep.join([str(hooks), src, os.environ.get("PYTHONPATH", "")])}


# -- 3. a worker that dies, a task that raises ---------------------------------------------------

def test_a_task_that_kills_its_worker_is_reported_and_the_rest_finishes(tmp_path):
    paths = write_sources(tmp_path)
    doomed = tmp_path / "doomed.sse"
    doomed.write_bytes(open(paths[0], "rb").read())
    inputs = paths[:3] + [str(doomed)] + paths[3:]
    env = faulty_env(tmp_path)
    clean = cli(*paths, "-j", "1")
    proc = cli(*inputs, "-j", "2", env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "BrokenProcessPool" not in err
    assert (f"{doomed}: worker died: the worker process reading the file's bytes was killed by SIGKILL "
            "(out of memory, or kill -9), in the pool and again alone") in err
    assert "a worker process died (killed, or out of memory)" in err
    assert proc.stdout == clean.stdout  # every other file, complete and in order


def test_a_worker_killed_while_it_sends_a_result_back_loses_nothing(tmp_path):
    # Found by a stress run (kill -9 at random times, one core busy): a worker killed partway
    # through writing a large result left half a message in the pool's result pipe; the pool's
    # reader waited for the rest for ever, and so did the CLI. A result sent back is now never
    # longer than one write the kernel makes whole (the rest goes through a file).
    paths = write_sources(tmp_path, n=4, responses=150)
    torn = tmp_path / "torn.sse"
    torn.write_bytes(open(paths[0], "rb").read())
    inputs = paths[:2] + [str(torn)] + paths[2:]
    clean = cli(*inputs, "-j", "1")  # (no fault without the hook)
    proc = _cli_in_session(*inputs, "-j", "2", env=faulty_env(tmp_path))
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        _kill_all(proc)
    _death_reported(proc, out, err, clean)


def test_a_task_that_raises_is_reported_and_the_rest_finishes(tmp_path):
    paths = write_sources(tmp_path, n=3)
    cursed = tmp_path / "cursed.sse"
    cursed.write_bytes(open(paths[0], "rb").read())
    env = faulty_env(tmp_path)
    clean = cli(*paths, "-j", "1")
    for jobs in ("1", "2"):
        proc = cli(paths[0], str(cursed), *paths[1:], "-j", jobs, env=env)
        err = proc.stderr.decode()
        assert proc.returncode == 1, err
        assert "Traceback" not in err
        assert f"{cursed}: internal error: RecursionError: maximum recursion depth exceeded" in err
        assert proc.stdout == clean.stdout


def _cli_in_session(*args: str, env: dict | None = None) -> subprocess.Popen:
    """Start the CLI in a session of its own: _kill_all then reaches every worker a hung run leaves."""
    return subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, start_new_session=True)


def _death_reported(proc: subprocess.Popen, out: bytes, err: bytes, clean: subprocess.CompletedProcess) -> None:
    """Check that a run a worker died in reported it, without a traceback, and wrote what -j 1 writes."""
    text = err.decode()
    assert "Traceback" not in text, text
    assert proc.returncode == 1, text
    assert "a worker process died (killed, or out of memory)" in text
    assert out == clean.stdout


def _kill_all(proc: subprocess.Popen) -> None:
    """Kill a CLI started in a session of its own, with every worker it left (a hung run leaves some)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _workers_of(pid: int) -> list[int]:
    children = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children


def test_a_link_loop_in_a_walked_directory_is_reported_and_the_run_goes_on(tmp_path):
    # Found by review: a link to itself named like a capture, met while walking a directory, raised
    # from the walk (ELOOP): a traceback, and no record at all, not even of the inputs before it.
    first, = write_sources(tmp_path, n=1, responses=2)
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "b.sse").write_bytes(open(first, "rb").read())
    os.symlink("self.sse", loop / "self.sse")
    proc = cli(first, str(loop), "-j", "1")
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"self.sse: Too many levels of symbolic links" in proc.stderr
    assert {r["source"] for r in records(proc)} == {first, str(loop / "b.sse")}


def test_the_output_file_is_never_read_as_an_input(tmp_path):
    # Found by review: -o inside a walked directory was truncated, then walked as an input ("not a
    # stream: the body is empty", exit 1 on every run); -o naming an input emptied the capture.
    # A second run found the first one's output, and a glob or walk could reach a capture named
    # by -o: each was emptied first, silently skipped once the fix began to skip the output file.
    first, = write_sources(tmp_path, n=1, responses=2)
    out = tmp_path / "out.jsonl"
    proc = cli(str(tmp_path), "-o", str(out))  # a new file: made by the run, and never read by it
    assert proc.returncode == 0, proc.stderr
    made = out.read_bytes()
    assert {r["source"] for r in [orjson.loads(line) for line in made.splitlines()]} == {first}
    before = open(first, "rb").read()
    for inputs, target in (([str(tmp_path)], str(out)), ([first], first), ([str(tmp_path / "*.sse")], first),
                           ([str(tmp_path)], first)):
        proc = cli(*inputs, "-o", target)  # an existing file that is an input: refused, untouched
        assert proc.returncode == 2 and b"writing there would destroy it" in proc.stderr, (inputs, proc.stderr)
    assert open(first, "rb").read() == before and out.read_bytes() == made
    walked = tmp_path / "walked"
    walked.mkdir()
    (walked / "a.sse").write_bytes(before)
    with open(walked / "redirected.jsonl", "wb") as stdout:  # standard output into the walked directory
        proc = cli(str(walked), stdout=stdout)
    assert proc.returncode == 0 and b"redirected.jsonl" not in proc.stderr, proc.stderr
    lines = (walked / "redirected.jsonl").read_bytes().splitlines()
    assert lines and {orjson.loads(line)["source"] for line in lines} == {str(walked / "a.sse")}


@pytest.mark.parametrize("closed, code, says", [(">&-", EXIT_OUTPUT, b"cannot write standard output: it is closed"),
                                                ("<&-", 1, b"<stdin>: standard input is closed")])
def test_a_closed_standard_stream_is_said_plainly(tmp_path, closed, code, says):
    # Found by review: started with standard output closed, the CLI died with a traceback; with
    # standard input closed, it reported an internal error.
    first, = write_sources(tmp_path, n=1, responses=2)
    args = first if closed == ">&-" else ""
    proc = subprocess.run(f"{sys.executable} -m callstitch reassemble {args} {closed}", shell=True,
                          stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == code and says in proc.stderr, proc.stderr
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_stops_the_run_and_leaves_no_temporary_files(tmp_path, jobs):
    # A job scheduler stops a run with SIGTERM: Python's default ended the process at once, and the
    # directory for the records of a whole source (a pipe here), with any records in it, stayed.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", "-", "-j", jobs,
                             "-o", str(tmp_path / "out.jsonl")], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp)})
    try:
        proc.stdin.write(b"".join(body for body, _ in workload.responses(50, seed=4)))
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not list(tmp.iterdir()):  # the run has begun: it made its directory for records
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.01)
        # Then it waits for more input. (A signal that comes while a buffered read copies what it
        # got, between two system calls, waits for the next bytes: Python runs handlers between them.)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)  # (the pipe still open: the run would not end by itself)
    finally:
        proc.kill()
        proc.stdin.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert code == 128 + signal.SIGTERM, stderr
    assert b"Traceback" not in stderr
    assert list(tmp.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to find the workers")
def test_a_worker_killed_from_outside_loses_nothing(tmp_path):
    # kill -9 of a busy worker: its tasks run again, the output is what -j 1 writes.
    paths = write_sources(tmp_path, n=12, responses=150)
    clean = cli(*paths, "-j", "1")
    proc = _cli_in_session(*paths, "-j", "2")
    try:
        victims: list[int] = []
        deadline = time.monotonic() + 60
        while not victims and proc.poll() is None and time.monotonic() < deadline:
            victims = _workers_of(proc.pid)
        assert victims, "the CLI ended before it started a worker"
        os.kill(victims[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        _kill_all(proc)
    _death_reported(proc, out, err, clean)


# -- 3. an output that cannot be written -----------------------------------------------------------

def test_unwritable_output_path(tmp_path):
    paths = write_sources(tmp_path, n=1)
    target = tmp_path / "no" / "such" / "dir" / "out.jsonl"
    for fmt in ("jsonl", "parquet"):
        if fmt == "parquet":
            pytest.importorskip("pyarrow")
        proc = cli(paths[0], "-o", str(target), "--output-format", fmt)
        err = proc.stderr.decode()
        assert proc.returncode == EXIT_OUTPUT, err
        assert "Traceback" not in err
        assert f"callstitch: cannot write {str(target)!r}: " in err and "No such file or directory" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("how", ["-o", "stdout", "parquet"])
def test_full_disk(tmp_path, how):
    paths = write_sources(tmp_path, n=2)
    if how == "-o":
        proc = cli(*paths, "-o", "/dev/full")
    elif how == "parquet":
        pytest.importorskip("pyarrow")
        proc = cli(*paths, "-o", "/dev/full", "--output-format", "parquet")
    else:
        with open("/dev/full", "wb") as full:
            proc = cli(*paths, stdout=full)
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_OUTPUT, err
    assert "Traceback" not in err and "Exception ignored" not in err
    where = "standard output" if how == "stdout" else "'/dev/full'"
    assert f"callstitch: cannot write {where}: " in err and "No space left on device" in err


def test_exit_status_3_is_documented():
    text = " ".join(cli("--help").stdout.decode().split())
    assert "3 when the output could not be written" in text
    readme = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read().split())
    assert "3 when the output could not be written" in readme


# -- 5. choices made from names ---------------------------------------------------------------------

def test_output_format_from_the_suffix(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    paths = write_sources(tmp_path, n=2)
    expected = records(cli(*paths))
    parquet = tmp_path / "calls.parquet"
    proc = cli(*paths, "-o", str(parquet))
    assert proc.returncode == 0, proc.stderr
    assert parquet.read_bytes()[:4] == b"PAR1"
    rows = pq.read_table(parquet).to_pylist()
    assert [(r["source"], r["stream"], r["id"]) for r in rows] == [(r["source"], r["stream"], r["id"]) for r in expected]
    for name in ("calls.jsonl", "calls.ndjson", "calls.json", "calls.txt", "calls"):
        out = tmp_path / name
        assert cli(*paths, "-o", str(out)).returncode == 0
        assert [orjson.loads(line) for line in out.read_bytes().splitlines()] == expected
    # An explicit --output-format wins over the suffix.
    assert cli(*paths, "-o", str(parquet), "--output-format", "jsonl").returncode == 0
    assert [orjson.loads(line) for line in parquet.read_bytes().splitlines()] == expected
    # A suffix that names something neither writer makes is a usage error, before any work.
    proc = cli(*paths, "-o", str(tmp_path / "calls.jsonl.gz"))
    assert proc.returncode == 2
    assert "cannot write gz" in proc.stderr.decode() and "--output-format" in proc.stderr.decode()
    assert not (tmp_path / "calls.jsonl.gz").exists()


def _gateway_log(tmp_path, name: str = "gateway.jsonl", lines: int = 30) -> tuple[str, list[bytes]]:
    bodies = [b for b, _ in workload.responses(lines, seed=4)]
    text = b"".join(orjson.dumps({"ts": i, "request": {"model": "gpt-4o"},
                                  "response": {"status": 200, "body": b.decode()}}) + b"\n"
                    for i, b in enumerate(bodies))
    path = tmp_path / name
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return str(path), bodies


@pytest.mark.parametrize("name", ["gateway.jsonl", "gateway.jsonl.gz"])
def test_a_log_read_without_field_is_named_once(tmp_path, name):
    path, _ = _gateway_log(tmp_path, name)
    proc = cli(path)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert "unexpected shape" not in err
    (line,) = [x for x in err.splitlines() if x.startswith(f"callstitch: {path}")]
    assert line == (f"callstitch: {path} (byte 0): looks like a log (JSON lines, a captured response in each), "
                    "not a response body: read it with --field response.body (from Python: field='response.body'); "
                    "the file was not read")
    assert proc.stdout == b""
    good = cli(path, "--field", "response.body")
    assert good.returncode == 0 and len(records(good)) > 30


def test_a_log_of_chunk_lists_names_its_field(tmp_path):
    body = open(os.path.join(os.path.dirname(__file__), "fixtures", "captures",
                             "openai__openai-python__chat-single-tool.sse"), "rb").read()
    chunks = [orjson.loads(e[6:]) for e in body.split(b"\n\n") if e.startswith(b"data: {")]
    path = tmp_path / "sdk.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"session": i, "events": {"chunks": chunks}}) + b"\n" for i in range(3)))
    err = cli(str(path)).stderr.decode()
    assert "read it with --field events.chunks" in err and "unexpected shape" not in err


def test_a_wrong_field_says_where_the_body_is(tmp_path):
    path, _ = _gateway_log(tmp_path)
    proc = cli(path, "--field", "body")
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert f"{path} (line 1, byte 0): no body: the line has no 'body' (a body is at 'response.body': " \
           "--field response.body?)" in err


def test_ndjson_bodies_are_still_bodies(tmp_path):
    # An Ollama stream and a chunk-per-line OpenAI body also start with "{": they are read, not refused.
    ollama = b"".join(b for b, _ in workload.format_responses("ollama", 3))
    path = tmp_path / "ollama.ndjson"
    path.write_bytes(ollama)
    proc = cli(str(path))
    assert proc.returncode == 0, proc.stderr
    assert len(records(proc)) > 0


def test_a_parcel_that_cannot_be_written_leaves_no_file_and_is_sent_whole(tmp_path, monkeypatch):
    # Found by review: a failed write (a full disk) left the half-written file behind until the batch ended.
    from callstitch._batch import pool
    from callstitch._batch.task import Outcome, Task
    big = Outcome(b"x" * (1 << 20), 0, 0, 0, {}, {}, [], 0, 0, 0, 0, "stream")
    monkeypatch.setattr(pool, "run_safely", lambda task: big)
    real = pool.tempfile.NamedTemporaryFile

    class Full:
        def __init__(self, **kwargs):
            self.file = real(**kwargs)
            self.name = self.file.name

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            self.file.write(data[:4096])
            self.file.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(pool.tempfile, "NamedTemporaryFile", Full)
    task = Task(str(tmp_path / "capture.sse"), "body", "auto", None, None, 0, None, 0, spill=str(tmp_path))
    assert pool._run_in_pool(task) is big
    assert [p.name for p in tmp_path.iterdir()] == []
    monkeypatch.setattr(pool.tempfile, "NamedTemporaryFile", real)
    parcel = pool._run_in_pool(task)  # (with room: a parcel, read back whole, its file then gone)
    assert type(parcel) is pool.Parcel and pool._unpacked(task, parcel) == big
    assert [p.name for p in tmp_path.iterdir()] == []
