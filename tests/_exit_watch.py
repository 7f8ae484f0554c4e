"""A pytest plugin: a run that has finished but does not exit says what it waits on, then exits.

Once in some forty CI runs the suite printed its summary and then never exited, and CI timed
out with nothing to show why; hundreds of runs since have not done it again. Something at exit
waited for ever: a thread not marked daemon, an atexit handler joining a pool or a JVM, a child
process. If that happens again, this prints the stack of every thread and the process's
children, then ends the process with the run's own status: the tests' verdict stands, and
the log holds what hung.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time

# Seconds from the end of the run to the report; a run exits within one or two.
GRACE = float(os.environ.get("CALLSTITCH_TEST_EXIT_GRACE", "120"))
_status = [1]  # the run's exit status, once pytest_sessionfinish has it


def pytest_sessionfinish(session, exitstatus) -> None:
    """Keep the run's exit status for a watchdog that has to end the process."""
    _status[0] = int(exitstatus)


def pytest_unconfigure(config) -> None:
    """Start the watchdog: the last thing pytest does before the interpreter's own exit."""
    threading.Thread(target=_watch, name="exit-watch", daemon=True).start()
    # Python's thread cannot run if the hang holds the interpreter (a C call that keeps the GIL, or
    # a finalizer once daemon threads are stopped): faulthandler's C thread then dumps the stacks
    # and exits with status 1.
    faulthandler.dump_traceback_later(2 * GRACE, exit=True, file=sys.__stderr__)


def _watch() -> None:
    time.sleep(GRACE)  # a daemon thread: when the process exits first, as it should, this never wakes
    out = sys.__stderr__
    print(f"\ncallstitch tests: the run ended {GRACE:.0f} s ago and the process has not exited. "
          "Its threads:", file=out, flush=True)
    faulthandler.dump_traceback(file=out, all_threads=True)
    print(f"Its child processes: {_children() or 'none'}", file=out, flush=True)
    os._exit(_status[0])


def _children() -> list[str]:
    """Return the pid and command line of each child of this process (Linux's /proc; elsewhere none)."""
    me = str(os.getpid())
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[1].decode() != me:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue
        found.append(f"{pid} {command[:200]}")
    return found
