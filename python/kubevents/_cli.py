"""What ``python -m kubevents`` and its ``sweep`` subcommand share: the trace options, the rate syntax, and how
they end (a one-line error for bad input, quiet when the reader of stdout goes away)."""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction
from typing import Any

from kubevents.traces import from_kubectl, kubelet_storm, read_parquet

USER_ERRORS = (OSError, TypeError, ValueError, ImportError)
"""What bad input raises (a missing or malformed file, a bad option); the command reports it in one line."""


def add_trace_options(p: argparse.ArgumentParser) -> None:
    """``--trace FILE`` or ``--kubectl FILE``; neither means the built-in kubelet storm."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="FILE",
                     help="JSON Lines or Parquet (*.parquet, needs pyarrow) trace (default: a built-in kubelet storm)")
    src.add_argument("--kubectl", metavar="FILE", help="a `kubectl get events -A -o json` dump instead")


def trace_of(args: argparse.Namespace) -> tuple[Any, str]:
    """The trace the options name, and how to name it in a report. Raises what reading a dump raises."""
    if args.kubectl:
        return from_kubectl(args.kubectl), f"kubectl dump {args.kubectl}"
    if args.trace:
        if str(args.trace).endswith(".parquet"):
            return read_parquet(args.trace), args.trace
        return args.trace, args.trace
    return kubelet_storm(), "built-in kubelet storm (kubevents.traces.kubelet_storm)"


def parse_rate(text: str) -> float:
    """A rate as the command line writes it: a decimal (``0.01``) or a fraction (``1/300``, client-go's
    default spam filter refill). Raises ``ValueError`` for anything else."""
    try:
        return float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{text!r} is not a number (or a fraction such as 1/300)") from None
    except OverflowError:
        raise ValueError(f"{text!r} is too large") from None


def rate(text: str) -> float:
    """``parse_rate`` as an argparse ``type``."""
    try:
        return parse_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def count(text: str) -> int:
    """An int >= 0, as an argparse ``type``."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def fail(e: BaseException) -> int:
    """Reports bad input in one line on stderr; the exit status of a usage error."""
    print(f"kubevents: {e}", file=sys.stderr)
    return 2


def emit(text: str) -> int:
    """Prints ``text``; when the reader of stdout has gone (``| head``), ends quietly as CPython's documentation
    of SIGPIPE recommends, with status 1."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit, which would fail the same way: point it at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0
