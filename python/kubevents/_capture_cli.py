"""``python -m kubevents capture``: capture a cluster's Events to a trace (``kubevents.capture``)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from kubevents.capture import APIS, Capture, CaptureError, CaptureStats, parse_duration

EPILOG = """\
The trace holds one record per occurrence the API server counted while the capture ran (an Event's count
going from 4 to 7 is three), at the event's own time; replay it with
`python -m kubevents --trace FILE` or `python -m kubevents sweep --trace FILE ...`.

Exit status: 0 when the duration ran out; 130 when Ctrl-C (SIGINT), 143 when SIGTERM ended the capture
first (a second one quits at once); the file then holds, complete, what was captured. 1 when there is no
cluster to capture from, or the API server could not be reached or refused the list or watch (the file holds
what was captured before), 2 for bad arguments.
"""


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kubevents capture",
        description="Capture a cluster's Events (list and watch, with the official kubernetes client) as a trace "
                    "for the tuning lab.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("output", metavar="FILE", help="the trace to write: FILE.jsonl (JSON Lines) or FILE.parquet")
    p.add_argument("--duration", type=_duration, metavar="DURATION",
                   help="how long to capture: 90s, 10m, 1h30m (default: until Ctrl-C)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NAMESPACE",
                       help="a namespace to capture; repeat for more")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="capture every namespace (the default)")
    p.add_argument("--api", choices=APIS, default=APIS[0],
                   help="the API to watch; both serve the same events (default core/v1)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="the kubeconfig (default: the pod's service account in a pod, else $KUBECONFIG or "
                        "~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context (default: its current one)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    stop = threading.Event()
    caught: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)
        stop.set()
        signal.signal(signum, signal.SIG_DFL)  # a second one quits at once

    try:
        capture = Capture(args.output, duration=args.duration, namespaces=args.namespaces, api=args.api,
                          kubeconfig=args.kubeconfig, context=args.context, progress=not args.no_progress,
                          stop=stop)
    except (OSError, TypeError, ValueError, ImportError) as e:
        print(f"kubevents: {e}", file=sys.stderr)
        return 2
    # Signal handlers can be set in the main thread only; elsewhere Ctrl-C stays a KeyboardInterrupt.
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    try:
        capture.run()
    except CaptureError as e:
        print(f"kubevents: {e}", file=sys.stderr)
        _summary(capture.stats, args.output)
        return 1
    except (OSError, ValueError, ImportError) as e:
        print(f"kubevents: {e}", file=sys.stderr)
        return 2
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _summary(capture.stats, args.output)
    return 128 + caught[0] if caught else 0


def _summary(stats: CaptureStats, path: str) -> None:
    print(f"kubevents capture: wrote {stats.summary()} to {path}")
