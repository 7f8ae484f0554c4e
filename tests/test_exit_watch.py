"""The suite's exit watchdog (_exit_watch.py): a finished run that hangs at exit reports what it waits on and exits."""

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

# A run whose test leaves a thread that is no daemon waiting for ever: the interpreter's exit joins it.
HANGING = textwrap.dedent("""
    import threading

    def wait_for_ever_at_exit():
        threading.Event().wait()

    def test_leaves_a_thread_behind():
        threading.Thread(target=wait_for_ever_at_exit, name="left-behind").start()
        assert {verdict}
""")


def _run(tmp_path, verdict):
    test = tmp_path / "test_hangs.py"
    test.write_text(HANGING.format(verdict=verdict))
    env = dict(os.environ, PYTHONPATH=HERE, CALLSTITCH_TEST_EXIT_GRACE="2")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "_exit_watch", "-p", "no:cacheprovider",
                           str(test)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_run_that_hangs_at_exit_says_on_what_and_keeps_its_verdict(tmp_path):
    done = _run(tmp_path, "True")
    assert "1 passed" in done.stdout
    assert "has not exited" in done.stderr
    assert "wait_for_ever_at_exit" in done.stderr  # the stack of the thread it waits on
    assert done.returncode == 0, done.stderr


def test_a_failed_run_that_hangs_still_fails(tmp_path):
    done = _run(tmp_path, "False")
    assert "1 failed" in done.stdout and "has not exited" in done.stderr
    assert done.returncode == 1
