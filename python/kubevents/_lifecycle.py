"""What kubevents does when the interpreter exits or the process forks.

At exit (``atexit``), every broadcaster and PLEG that started threads and is still alive is flushed: it stops
taking events and delivers what it holds, all of them together within ``exit_timeout`` seconds. Then
kubevents' threads stop touching Python, so that the interpreter can finalize around them: a thread still in a
sink call parks for good when the call returns, as CPython stops its own daemon threads. What could not be
delivered is logged once, as one warning on the ``kubevents`` logger.

After ``os.fork()`` the child has none of the parent's threads: a broadcaster or PLEG created before the fork
raises ``RuntimeError`` when used in the child; create new ones there.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
import weakref
from typing import Any

from kubevents import _native

__all__ = ["DEFAULT_EXIT_TIMEOUT", "get_exit_timeout", "set_exit_timeout"]

#: Seconds the exit hook gives all live broadcasters and PLEGs together to deliver what they hold.
DEFAULT_EXIT_TIMEOUT = 5.0
# Even with nothing left to deliver, threads in a sink call get this long to return before finalization.
_GATE_GRACE = 0.5

_exit_timeout = DEFAULT_EXIT_TIMEOUT
_live: weakref.WeakSet[Any] = weakref.WeakSet()
_logger = logging.getLogger("kubevents")


def set_exit_timeout(seconds: float) -> None:
    """Sets how long, in seconds, the exit hook waits in all for live broadcasters and PLEGs to deliver what
    they hold (default ``DEFAULT_EXIT_TIMEOUT``); 0 delivers nothing at exit."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"exit timeout: expected seconds (a number), got {type(seconds).__name__}")
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"exit timeout: must be >= 0 and finite, got {seconds}")
    global _exit_timeout
    _exit_timeout = float(seconds)


def get_exit_timeout() -> float:
    """The exit hook's time limit in seconds (see ``set_exit_timeout``)."""
    return _exit_timeout


def track(obj: Any) -> None:
    """Flush ``obj`` at exit: it has ``_exit_flush(timeout) -> (name, undelivered, given_up)``, the events it
    could not deliver in time and those its sinks gave up meanwhile."""
    _live.add(obj)


def _at_exit() -> None:
    deadline = time.monotonic() + _exit_timeout
    lost: list[str] = []
    gave: list[str] = []
    total = given_up = 0
    for obj in list(_live):
        try:
            name, undelivered, gave_up = obj._exit_flush(max(0.0, deadline - time.monotonic()))
        except Exception:
            _logger.exception("kubevents: flushing %r at exit failed", obj)
            continue
        if undelivered:
            total += undelivered
            lost.append(f"{name}: {undelivered}")
        if gave_up:
            given_up += gave_up
            gave.append(f"{name}: {gave_up}")
    still_inside = _native._close_gate(max(_GATE_GRACE, deadline - time.monotonic()))
    if total or given_up or still_inside:
        # One line for every broadcaster and PLEG together; their stats() hold the rest.
        _logger.warning(
            "kubevents: at exit, %d events could not be delivered within %s s (%s), %d were given up by their "
            "sinks (%s); %d sink or runtime calls were still running", total, _exit_timeout,
            ", ".join(lost) or "none queued", given_up, ", ".join(gave) or "none", still_inside,
        )


def _after_fork_in_child() -> None:
    _live.clear()
    _native._after_fork_in_child()


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
