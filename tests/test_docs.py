"""Every Python example of the README and of the documentation site runs as written and type-checks; the
examples that print check what their comments claim.

The examples that talk to a cluster call ``load_kube_config()``: here that config points at a local fake API
server (``FakeCluster``), and the tests read back what the example left there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import kubernetes_asyncio
import prometheus_client
import pytest
from pytest_httpserver import HTTPServer

from docs_examples import Example, example, examples, pages
from fake_apiserver import FakeCluster

ALL = [e for page in pages() for e in examples(page)]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    """A fake API server that both official clients' ``load_kube_config()`` connect to (as admin)."""
    http = HTTPServer()
    http.start()
    try:
        fake = FakeCluster(http)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": fake.host}}],
            "users": [{"name": "admin", "user": {"token": FakeCluster.ADMIN_TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
        }))
        for client in (kubernetes, kubernetes_asyncio):
            monkeypatch.setattr(client.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
            # load_kube_config() sets the process-wide default; the next test must not inherit it.
            monkeypatch.setattr(client.client.Configuration, "_default", None)
        yield fake
    finally:
        http.clear()
        http.stop()


def core_events(fake: FakeCluster) -> list[dict[str, object]]:
    return list(fake.core_v1.events.values())


@pytest.mark.parametrize("ex", [e for e in ALL if not e.skip], ids=lambda e: e.name)
def test_example_runs(ex: Example, cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # The metrics example serves on a port; the registration is what it shows.
    monkeypatch.setattr(prometheus_client, "start_http_server", lambda *a, **k: None)
    ex.run()


def test_examples_pass_mypy(tmp_path: Path) -> None:
    files = []
    for e in ALL:
        if not e.skip:
            files.append(tmp_path / (e.name.replace("/", "_").replace(".", "_").replace(":", "_") + ".py"))
            files[-1].write_text(e.code)
    # The official clients ship no type information; what is checked is the use of kubevents.
    p = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--disable-error-code", "import-untyped",
                        *map(str, files)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


def test_quickstart_leaves_one_event_counted_three_times(cluster: FakeCluster, capsys: pytest.CaptureFixture[str]):
    example("docs/guides/quickstart.md", "CoreV1Sink(core)").run()
    assert capsys.readouterr().out == "1 2\n"
    [event] = core_events(cluster)
    assert (event["count"], event["reason"], event["message"]) == (3, "BackOff",
                                                                   "Back-off restarting container app")
    assert event["source"] == {"component": "my-controller"}


def test_quickstart_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    example("docs/guides/quickstart.md", "MemorySink()").run()
    assert capsys.readouterr().out == "25 1 24 5\n"
    example("docs/guides/quickstart.md", "FakeRecorder()").run()
    assert capsys.readouterr().out == "['Normal Synced synced 3 pods']\n"


def test_recording_examples(capsys: pytest.CaptureFixture[str]) -> None:
    page = "docs/guides/recording.md"
    example(page, "start_event_watcher").run()
    assert capsys.readouterr().out == (
        "['Pulled', 'Unhealthy']\n{'component': 'my-controller', 'host': 'node-1'}\n{'team': 'web'}\n")
    example(page, "object_reference").run()
    assert capsys.readouterr().out == (
        "{'kind': 'Deployment', 'namespace': 'prod', 'name': 'web', 'uid': 'd1', 'apiVersion': 'apps/v1'}\n")
    example(page, "class Flaky").run()
    assert capsys.readouterr().out == "1 2\n"


def test_correlator_example(capsys: pytest.CaptureFixture[str]) -> None:
    example("docs/guides/recording.md", "kubevents.Correlator(").run()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("create api-0.")
    assert out[1].startswith("patch api-0.") and '"count":2' in out[1]
    assert out[2].startswith("patch api-0.") and '"count":3' in out[2]
    assert "'events': " in out[3] and "'creates': " in out[3]


def test_asyncio_examples(cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    example("docs/guides/asyncio.md", "AsyncCoreV1Sink(core)").run()
    assert capsys.readouterr().out == "1 2\n"
    [event] = core_events(cluster)
    assert (event["count"], event["reason"]) == (3, "SyncFailed")
    example("docs/guides/asyncio.md", "class AuditSink").run()
    assert capsys.readouterr().out == "create scaled to 3 replicas\npatch count 2\n"


def test_events_v1_examples(cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    example("docs/guides/events-v1.md", "new_event_broadcaster_adapter").run()
    assert cluster.events_v1 is not None
    [event] = cluster.events_v1.events.values()
    assert (event["reason"], event["action"], event["note"], event["reportingController"]) == (
        "Synced", "Sync", "synced web-0", "my-controller")
    example("docs/guides/events-v1.md", "FakeEventsRecorder()").run()
    assert capsys.readouterr().out == "['Warning BackOff Back-off restarting api']\n"


def test_pleg_example(capsys: pytest.CaptureFixture[str]) -> None:
    example("docs/guides/pleg.md", "GenericPLEG(").run()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        '[PodLifecycleEvent(id="uid-1", type="ContainerStarted", data="c1"), '
        'PodLifecycleEvent(id="uid-1", type="ContainerStarted", data="s1")]'
    )
    assert out[1] == "(False, 'pleg was last seen active 4m0s ago; threshold is 3m0s')"


def test_lab_examples(capsys: pytest.CaptureFixture[str]) -> None:
    page = "docs/guides/lab.md"
    example(page, 'generate("storm"').run()
    assert capsys.readouterr().out == "5000 500 1.0 4500\n"
    example(page, "kubevents.sweep(").run()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("{'burst': 5, 'max_events': 3, 'writes': ")
    assert all("'message_share': " in line and "'unreported': " in line for line in lines)
    example(page, "traces.to_arrow(").run()
    assert capsys.readouterr().out == "True 1000\n"
