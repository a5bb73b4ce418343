"""The trace options of the command line, shared by ``python -m kubevents`` and its ``sweep`` subcommand."""

from __future__ import annotations

import argparse
from typing import Any

from kubevents.traces import from_kubectl, kubelet_storm, read_parquet


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
