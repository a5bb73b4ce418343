r"""``crashloop_controller.py`` on asyncio: the same controller with ``kubernetes_asyncio``, writing its events
through ``AsyncCoreV1Sink`` on the controller's own event loop. It repeats the other file's controller logic, so
that it needs ``kubernetes_asyncio`` alone.

Run it as the other one (``pip install kubevents kubernetes_asyncio``)::

    python examples/crashloop_controller_async.py [--namespace demo]

Ctrl-C or SIGTERM cancels the watch, then ``await broadcaster.aclose()`` writes what is still queued (the
sink's writes go on running on the loop meanwhile) and the controller exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

import kubernetes_asyncio

import kubevents
from kubevents.sinks import AsyncCoreV1Sink

COMPONENT = "crashloop-controller"
SHUTDOWN_TIMEOUT = 10  # seconds for the final flush
WATCH_TIMEOUT = 300  # seconds before the server ends a watch, and the controller opens the next one

log = logging.getLogger(COMPONENT)


def crash_looping(pod: Any) -> list[tuple[str, int]]:
    """``(container, restart count)`` of each container of ``pod`` (a ``V1Pod``) that waits in
    CrashLoopBackOff."""
    statuses = (pod.status and pod.status.container_statuses) or []
    return [(s.name, s.restart_count) for s in statuses
            if s.state and s.state.waiting and s.state.waiting.reason == "CrashLoopBackOff"]


class Controller:
    """Records one event per restart of a crash-looping container (see ``crashloop_controller.py``)."""

    def __init__(self, recorder: kubevents.Recorder) -> None:
        self.recorder = recorder
        self.warned: dict[tuple[str, str], int] = {}  # (pod uid, container): the restart count warned about

    def handle(self, pod: Any) -> None:
        for container, restarts in crash_looping(pod):
            key = (pod.metadata.uid, container)
            if self.warned.get(key) == restarts:
                continue
            self.warned[key] = restarts
            # Queues the event and returns at once: the sink writes it on this loop, between awaits.
            self.recorder.eventf(pod, "Warning", "CrashLoopBackOff", "Container %s keeps crashing; back-off "
                                 "restarting it", container, field_path=f"spec.containers{{{container}}}")

    def forget(self, pod: Any) -> None:
        for key in [k for k in self.warned if k[0] == pod.metadata.uid]:
            del self.warned[key]


async def load_config() -> None:
    """The pod's service account in a cluster, else the kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    try:
        kubernetes_asyncio.config.load_incluster_config()
    except kubernetes_asyncio.config.ConfigException:
        await kubernetes_asyncio.config.load_kube_config()


async def watch_pods(core: Any, namespace: str | None, controller: Controller) -> None:
    """Watches the pods until cancelled; each watch starts with every pod (``ADDED``)."""
    # The list call itself (not a wrapper): the watch reads from it what to make of the objects (V1Pod).
    call, args = (core.list_namespaced_pod, (namespace,)) if namespace else (core.list_pod_for_all_namespaces, ())
    while True:
        async with kubernetes_asyncio.watch.Watch() as watch:
            async for change in watch.stream(call, *args, timeout_seconds=WATCH_TIMEOUT):
                if change["type"] in ("ADDED", "MODIFIED"):
                    controller.handle(change["object"])
                elif change["type"] == "DELETED":
                    controller.forget(change["object"])


async def run(namespace: str | None) -> int:
    await load_config()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    async with kubernetes_asyncio.client.ApiClient() as client:
        core = kubernetes_asyncio.client.CoreV1Api(client)
        broadcaster = kubevents.Broadcaster()
        broadcaster.start_recording_to_sink(AsyncCoreV1Sink(core))  # its writes run on this loop
        controller = Controller(broadcaster.new_recorder(COMPONENT))
        log.info("watching pods in %s", f"namespace {namespace}" if namespace else "every namespace")
        watcher = asyncio.create_task(watch_pods(core, namespace, controller))
        stopped = asyncio.create_task(stopping.wait())
        try:
            await asyncio.wait({watcher, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.is_set():
                log.info("stopping; writing what is still queued")
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)  # a second one ends the process at once
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher  # raises what ended the watch, if not the signal
        finally:
            stopped.cancel()
            flushed = await flush(broadcaster)
    return 0 if flushed else 1


async def flush(broadcaster: kubevents.Broadcaster) -> bool:
    """Shuts the broadcaster down, writing what is queued; False if that took longer than
    ``SHUTDOWN_TIMEOUT``."""
    try:
        stats = await broadcaster.aclose(timeout=SHUTDOWN_TIMEOUT)
    except TimeoutError as e:
        log.error("%s", e)
        return False
    log.info("stopped: events written: %d created, %d patched; %d skipped by the spam filter, %d abandoned",
             stats["created"], stats["patched"], stats["skipped"], stats["abandoned"])
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record a Warning event for every restart of a crash-looping "
                                                 "container, through kubevents, on asyncio.")
    parser.add_argument("--namespace", help="watch the pods of this namespace only (default: every namespace)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return asyncio.run(run(args.namespace))


if __name__ == "__main__":
    sys.exit(main())
