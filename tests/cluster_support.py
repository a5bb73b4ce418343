"""What the tests against a cluster share (the fake API server of tests/fake_apiserver.py in tests/, it and a
real cluster in tests/integration/): waiting for a condition, a fake cluster on a local port, recording trace
records through a broadcaster, a capture running on a thread, and the example controllers (their manifests, a
pod that crash-loops, a controller running as a subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pytest_httpserver import HTTPServer

import kubevents
from fake_apiserver import FakeCluster
from kubevents.capture import Capture, CaptureStats

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"sync": ROOT / "examples" / "crashloop_controller.py",
            "asyncio": ROOT / "examples" / "crashloop_controller_async.py"}
DEPLOY = ROOT / "examples" / "deploy"
COMPONENT = "crashloop-controller"
REASON = "CrashLoopBackOff"
WAIT = 60  # seconds a test waits for a condition, a capture or an example


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT,
             log: Callable[[], str] | None = None) -> None:
    """Waits until ``condition()``, or fails saying ``what`` (and ``log()``) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"; the log:\n{log()}" if log else ""))
        time.sleep(0.02)


@contextmanager
def fake_cluster(*namespaces: str) -> Iterator[FakeCluster]:
    """A ``FakeCluster`` with these namespaces too, served from a threaded server (a watch holds a request
    open), its watches ended before the server stops."""
    server = HTTPServer(threaded=True)
    server.start()
    fake = FakeCluster(server)
    fake.namespaces |= set(namespaces)
    try:
        yield fake
    finally:
        fake.close()
        server.clear()
        server.stop()


def record_each(broadcaster: Any, records: Iterable[Mapping[str, Any]], namespace: str,
                clock: kubevents.FakeClock) -> None:
    """Records the trace records through ``broadcaster``, every object moved into ``namespace``, one recorder per
    source. The clock is set to each record's time, and each event is handled before it moves on: the same
    decisions in every run."""
    recorders: dict[tuple[str, str], Any] = {}
    for r in records:
        clock.set(r["t_ns"] / 1e9)
        i = r["involved"]
        ref = {"kind": i["kind"], "namespace": namespace, "name": i["name"], "uid": i["uid"],
               "apiVersion": i["api_version"]}
        source = (r["source_component"], r["source_host"])
        if source not in recorders:
            recorders[source] = broadcaster.new_recorder(*source)
        recorders[source].event(ref, r["type"], r["reason"], r["message"], field_path=i["field_path"] or None)
        assert broadcaster.wait_idle(WAIT)


class RunningCapture:
    """A ``kubevents.capture.Capture`` running on a thread until ``stop()``, which raises what it raised."""

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        self.stop_event = threading.Event()
        self.capture = Capture(path, stop=self.stop_event, **options)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.capture.run()
        except BaseException as e:  # noqa: BLE001 (raised again by stop())
            self.errors.append(e)

    def until(self, occurrences: int) -> None:
        wait_for(f"{occurrences} occurrences",
                 lambda: self.capture.stats.occurrences >= occurrences or bool(self.errors))

    def stop(self) -> CaptureStats:
        self.stop_event.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        if self.errors:
            raise self.errors[0]
        return self.capture.stats


def manifests(name: str) -> list[dict[str, Any]]:
    """The documents of ``examples/deploy/<name>``."""
    with open(DEPLOY / name, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def role_rules() -> list[dict[str, Any]]:
    """The rules of the ClusterRole in rbac.yaml."""
    [role] = [d for d in manifests("rbac.yaml") if d["kind"] == "ClusterRole"]
    return role["rules"]


def crashing_pod(name: str) -> dict[str, Any]:
    """A pod whose only container exits with an error a second after it starts: the kubelet restarts it with
    a growing back-off (10 s, 20 s, 40 s ...), its status waiting in CrashLoopBackOff meanwhile."""
    container = {"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1; exit 1"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}


def message(container: str = "app") -> str:
    return f"Container {container} keeps crashing; back-off restarting it"


class Example:
    """An example controller running as a subprocess, its stderr (the log) read on a thread."""

    def __init__(self, which: str, kubeconfig: str, *args: str) -> None:
        env = dict(os.environ, KUBECONFIG=kubeconfig)
        env.pop("KUBERNETES_SERVICE_HOST", None)  # the kubeconfig, even when the tests run in a pod
        self.proc = subprocess.Popen([sys.executable, str(EXAMPLES[which]), *args], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"the example ended ({self.proc.returncode}) before {text!r}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {text!r}:\n{self.output}")
            time.sleep(0.02)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        code = self.proc.wait(WAIT)
        self._reader.join(WAIT)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
