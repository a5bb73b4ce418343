"""Running a scenario in a child Python process, where a crash or a hang cannot take the test run down."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

# Markers of a process that died badly or raised: CPython's fatal errors, glibc's forced-unwind abort, Rust
# panics, an uncaught exception.
FATAL = ("Fatal Python error", "FATAL: exception not rethrown", "panicked at", "PanicException", "Traceback")


def run(code: str, timeout: float = 60, prelude: str = "") -> subprocess.CompletedProcess:
    """Runs ``prelude`` and ``code`` (dedented) in a fresh interpreter; a hang past ``timeout`` fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child process hung: stdout={e.stdout!r} stderr={e.stderr!r}")


def assert_clean(p: subprocess.CompletedProcess, code: int = 0, stdout: str | None = None) -> None:
    """The child exited with ``code``, printed nothing fatal, and printed the words of ``stdout`` if given."""
    bad = [m for m in FATAL if m in p.stderr]
    assert p.returncode == code and not bad, f"exit {p.returncode}, {bad}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    if stdout is not None:
        assert p.stdout.split() == stdout.split(), p.stdout + p.stderr


# For a child's code (prepend it): Ctrl-C once the wait it means to interrupt has begun. A signal sent before
# would raise KeyboardInterrupt in the plain code around the call instead. kubevents is imported on the
# watching thread only, so that a child's atexit handlers registered before its own import stay first.
CTRL_C = """
def when_waiting(then, timeout=60):
    \"\"\"Calls ``then()``, on a thread of its own, once a kubevents wait that Ctrl-C interrupts has begun.\"\"\"
    import threading, time

    def watch():
        from kubevents import _native
        deadline = time.monotonic() + timeout
        while not _native._interruptible_waits():
            if time.monotonic() > deadline:
                print("no wait began", flush=True)
                return
            time.sleep(0.001)
        then()

    threading.Thread(target=watch, daemon=True).start()

def ctrl_c_once_waiting():
    import os, signal
    when_waiting(lambda: os.kill(os.getpid(), signal.SIGINT))
"""


def interrupt_when_ready(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs ``code``, which calls ``when_waiting(ready)`` just before the call that blocks, and sends it SIGINT
    once that call waits (``ready`` prints ``ready`` then)."""
    prelude = CTRL_C + "def ready():\n    print('ready', flush=True)\n"
    p = subprocess.Popen(
        [sys.executable, "-u", "-c", prelude + textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", line + (p.stderr.read() if p.stderr else "")
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
        return subprocess.CompletedProcess(p.args, p.returncode, line + out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
