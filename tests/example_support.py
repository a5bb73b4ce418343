"""What the tests of the example controllers share (tests/test_examples.py against the fake API server,
tests/integration/test_e2e_examples.py against it and a real cluster): the examples and their manifests, a
pod that crash-loops, and an example running as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"sync": ROOT / "examples" / "crashloop_controller.py",
            "asyncio": ROOT / "examples" / "crashloop_controller_async.py"}
DEPLOY = ROOT / "examples" / "deploy"
COMPONENT = "crashloop-controller"
REASON = "CrashLoopBackOff"
WAIT = 60  # seconds a test waits for an example


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
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1; exit 1"]}]}}


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
