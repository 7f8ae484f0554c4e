"""Run tasks on worker processes, in order, and survive a worker's death."""

from __future__ import annotations

import itertools
import os
import pickle
import select
import tempfile
from collections import deque
from typing import Any, Iterable, Iterator, NamedTuple

from .task import Outcome, Task
from .worker import bytes_of, failed, run_safely

# The most bytes of pickled Outcome sent back whole through the pool's result pipe. The kernel
# writes PIPE_BUF bytes or fewer to a pipe at once or not at all; a longer write may stop partway.
# A worker killed in such a write (kill -9, the OOM killer) left half a message in the pipe, and
# the pool's reader waited for its rest for ever: the batch hung. A larger Outcome goes through a
# file (a Parcel), and the message stays within PIPE_BUF, with room for the pool's own framing.
_SENT_WHOLE = getattr(select, "PIPE_BUF", 512) - 512


class Parcel(NamedTuple):
    """An Outcome too large to send back whole through the result pipe: pickled in a file, for the parent."""

    path: str


class Workers:
    """A process pool that outlives its workers.

    When a worker dies (the OOM killer, kill -9) the pool breaks and every task it still held
    fails. The pool is then rebuilt for the tasks to come, and each failed task is run again
    alone in a process of its own, where a death can only be its own: it is reported with the
    task's source and byte range, and the batch goes on.
    """

    def __init__(self, jobs: int) -> None:
        # Imported here: it brings in multiprocessing, which nothing else needs (20 ms at every start).
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        self._executor = ProcessPoolExecutor
        self._broken_error = BrokenProcessPool
        self._jobs = jobs
        self._pool = self._executor(jobs, mp_context=_pool_context())
        self._reported: set = set()  # the pools whose break is already reported

    def submit(self, task: Task) -> tuple[Task, Any, Any]:
        """Start a task; return what result() takes."""
        try:
            return task, self._pool.submit(_run_in_pool, task), self._pool
        except self._broken_error:  # broken by a death not yet seen through a result
            self._rebuild(self._pool)
            return task, self._pool.submit(_run_in_pool, task), self._pool

    def result(self, entry: tuple[Task, Any, Any]) -> Outcome:
        """Return a task's Outcome, running it again alone if its pool broke."""
        task, future, pool = entry
        try:
            outcome = future.result()
            return _unpacked(task, outcome) if type(outcome) is Parcel else outcome
        except self._broken_error:
            first = pool not in self._reported
            self._reported.add(pool)
            self._rebuild(pool)
            outcome = _alone(task)
            if first:  # said once per break, with the first task that was held
                outcome = _with_problem(outcome, "worker died", "a worker process died (killed, or out of memory) "
                                        "while it held this task or another; the pool was rebuilt and its tasks "
                                        "were run again, each alone")
            return outcome
        except Exception as exc:  # noqa: BLE001 - e.g. an Outcome that could not be sent back
            return failed(task, "internal error", f"{type(exc).__name__}: {exc}; what {bytes_of(task)} hold "
                                                   "is not in the output")

    def _rebuild(self, pool: Any) -> None:
        if pool is self._pool:
            pool.shutdown(wait=False, cancel_futures=True)
            # The context is chosen again: this process now runs the old pool's threads.
            self._pool = self._executor(self._jobs, mp_context=_pool_context())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _run_in_pool(task: Task) -> Outcome | Parcel:
    """Run one task in a pool worker; return its Outcome, or a Parcel of it when it is too large to send whole."""
    outcome = run_safely(task)
    data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
    if len(data) <= _SENT_WHOLE:
        return outcome
    # In the batch's temporary directory, which the parent deletes at the end: a file left by a
    # worker killed before it sent its name goes with it.
    path = None
    try:
        with tempfile.NamedTemporaryFile(dir=task.spill, prefix="outcome-", delete=False) as f:
            path = f.name
            f.write(data)
    except OSError:  # (no room for it) sent whole, as before parcels: only a death partway through may hang
        if path is not None:
            _unlink(path)
        return outcome
    return Parcel(f.name)


def _unpacked(task: Task, parcel: Parcel) -> Outcome:
    """Return the Outcome a worker left in a file, and delete the file."""
    try:
        with open(parcel.path, "rb") as f:
            outcome: Outcome = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        return failed(task, "internal error", f"the result of {bytes_of(task)} could not be read back from "
                                               f"{parcel.path!r} ({type(exc).__name__}: {exc}); it is not in the output")
    finally:
        _unlink(parcel.path)
    return outcome


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _alone(task: Task) -> Outcome:
    """Run one task in a process of its own: if that process dies too, the task is what killed it."""
    context = _pool_context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_run_and_send, args=(task, send), daemon=True)
    process.start()
    send.close()
    try:
        outcome = receive.recv()  # before join(): a large Outcome fills the pipe until it is read
    except (EOFError, OSError):
        outcome = None
    finally:
        receive.close()
    process.join()
    if outcome is not None:
        return outcome
    return failed(task, "worker died", f"the worker process reading {bytes_of(task)} {_death(process.exitcode)}, "
                                        "in the pool and again alone; what those bytes hold is not in the output")


def _run_and_send(task: Task, send: Any) -> None:
    send.send(run_safely(task))
    send.close()


def _death(code: int | None) -> str:
    """Describe how a process ended, from its exit code."""
    if code is None or code >= 0:
        return f"exited with status {code}"
    import signal
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = " (out of memory, or kill -9)" if name == "SIGKILL" else ""
    return f"was killed by {name}{why}"


def _with_problem(o: Outcome, kind: str, message: str) -> Outcome:
    """Return o with one more problem, at no stream."""
    errors = dict(o.errors)
    errors[kind] = errors.get(kind, 0) + 1
    return o._replace(errors=errors, problems=[(None, None, kind, message)] + list(o.problems))


def _pool_context() -> Any:
    """Return how to start the worker processes: the platform's way, but never fork beside other threads.

    fork is the quickest start and is safe while this process runs one thread; a fork taken while
    other threads hold locks can hang the child, so then the workers come from a fork server.
    """
    import multiprocessing
    context: Any = multiprocessing.get_context()
    if (context.get_start_method() == "fork" and _thread_count() > 1
            and "forkserver" in multiprocessing.get_all_start_methods()):
        context = multiprocessing.get_context("forkserver")
    return context


def _thread_count() -> int:
    """Return how many threads this process runs, those of C libraries (pyarrow's pool, say) included."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the threads Python started are what can be seen
        import threading
        return threading.active_count()


def worker_count(jobs: int) -> int:
    """Return how many worker processes jobs asks for, at most PER_CORE_MOST per core.

    The work is CPU-bound: processes beyond the cores add memory, not speed. And a pool forks all
    its processes at its first task: -j 100000 forked thousands of them, for two small files, and
    outlived a SIGTERM while it did.
    """
    return max(1, min(jobs, PER_CORE_MOST * (os.cpu_count() or 1)))


PER_CORE_MOST = 4


def outcomes(plan: Iterable[tuple[str, Any]], jobs: int) -> Iterator[tuple[str, Outcome]]:
    """Yield (source, Outcome) of each planned item, in the plan's order, on jobs worker processes.

    No more processes are started than there are tasks to give them: the plan is read ahead by
    up to jobs tasks first (a task is a source and a byte range: small).
    """
    plan = iter(plan)
    jobs = worker_count(jobs)
    ahead = []
    tasks = 0
    if jobs > 1:  # a pool only pays when there are two tasks or more
        for what, item in plan:
            ahead.append((what, item))
            tasks += what == "task"
            if tasks >= jobs:
                break
    jobs = min(jobs, tasks)
    if jobs < 2:
        for what, item in itertools.chain(ahead, plan):
            yield _resolve(what, item)
        return
    inflight = jobs * 3
    workers = Workers(jobs)
    pending: deque[tuple[str, Any]] = deque()
    try:
        for what, item in itertools.chain(ahead, plan):
            pending.append(("future", workers.submit(item)) if what == "task" else (what, item))
            while len(pending) >= inflight:
                yield _resolve(*pending.popleft(), workers)
        while pending:
            yield _resolve(*pending.popleft(), workers)
    finally:
        workers.close()


def _resolve(what: str, item: Any, workers: Workers | None = None) -> tuple[str, Outcome]:
    if what == "future":
        return item[0].source, workers.result(item)  # type: ignore[union-attr]
    if what in ("task", "local"):
        return item.source, run_safely(item)
    path, problem = item
    return path, Outcome(b"", 0, 0, 0, {problem.kind: 1}, {}, [(None, problem.position, problem.kind,
                                                                problem.message)], 0, 0, 0, 0, "stream")
