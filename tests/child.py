"""Running a scenario in a child Python process, where a crash or a hang cannot take the test run down."""

import os
import signal
import subprocess
import sys
import textwrap
import time

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


def interrupt_when_ready(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs ``code``, which prints ``ready`` before it blocks, and sends it SIGINT once it has."""
    p = subprocess.Popen(
        [sys.executable, "-u", "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", line + (p.stderr.read() if p.stderr else "")
        # The blocking call comes right after the line; a signal before it would be handled by the plain code.
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
        return subprocess.CompletedProcess(p.args, p.returncode, line + out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
