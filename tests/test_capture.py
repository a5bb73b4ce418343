"""kubevents.capture and ``python -m kubevents capture``: a cluster's Events as a trace, captured from the fake
API server (tests/fake_apiserver.py) through the official client, and replayed."""

from __future__ import annotations

import _thread
import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

k8s = pytest.importorskip("kubernetes.client")

from pytest_httpserver import HTTPServer  # noqa: E402

import kubevents  # noqa: E402
from cluster_support import WAIT, RunningCapture, fake_cluster, record_each, wait_for  # noqa: E402
from fake_apiserver import FakeCluster  # noqa: E402
from kubevents import capture as capture_module  # noqa: E402
from kubevents.capture import Capture, CaptureError, CaptureStats, format_duration, parse_duration  # noqa: E402
from kubevents.sinks import CoreV1Sink  # noqa: E402
from kubevents.traces import generate, read_jsonl, read_parquet, to_records  # noqa: E402

T0 = 1_700_000_000


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with fake_cluster("shop", "search") as fake:
        yield fake


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> str:
    return cluster.kubeconfig(str(tmp_path / "kubeconfig"))


def record(cluster: FakeCluster, records: list[dict[str, Any]], namespace: str = "default") -> None:
    """Records the trace records through a Broadcaster (client-go's defaults) writing to the fake."""
    clock = kubevents.FakeClock(records[0]["t_ns"] / 1e9)
    with cluster.api_client() as client:
        b = kubevents.Broadcaster(clock=clock)
        b.start_recording_to_sink(CoreV1Sink(k8s.CoreV1Api(client)))
        record_each(b, records, namespace, clock)
        stats = b.shutdown(timeout=WAIT)
    assert stats["abandoned"] == 0


def stored_counts(cluster: FakeCluster) -> Counter[tuple[str, str, str]]:
    """The count of each stored core/v1 event, by (involved name, reason, message without the combined prefix)."""
    out: Counter[tuple[str, str, str]] = Counter()
    for e in cluster.core_v1.events.values():
        message = e["message"].removeprefix("(combined from similar events): ")
        out[(e["involvedObject"]["name"], e["reason"], message)] += e.get("count", 1)
    return out


def trace_counts(records: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((r["involved"]["name"], r["reason"], r["message"]) for r in records)


def watching(cluster: FakeCluster, n: int = 1) -> Callable[[], bool]:
    return lambda: cluster.core_v1.watch.watches >= n


# --- Occurrences from reports of events -----------------------------------------------------------------------

def core_event(count: int, last: str, *, name: str = "web-0.1", first: str = "2024-01-01T00:00:00Z",
               message: str = "Back-off restarting failed container") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "shop", "uid": "e1"},
            "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "p1", "apiVersion": "v1"},
            "reason": "BackOff", "message": message, "type": "Warning", "count": count,
            "firstTimestamp": first, "lastTimestamp": last, "source": {"component": "kubelet", "host": "node-1"}}


def v1_event(series: int | None, last: str, *, core_view: bool = False) -> dict[str, Any]:
    """An event recorded through events.k8s.io/v1, as that API serves it, or as core/v1 serves the same one."""
    regarding = {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "p1", "apiVersion": "v1"}
    event: dict[str, Any] = {
        "metadata": {"name": "web-0.2", "namespace": "shop", "uid": "e2"}, "eventTime": "2024-01-01T00:00:00.250000Z",
        "reportingController": "kubelet", "reportingInstance": "node-1", "action": "Restart", "reason": "BackOff",
        "type": "Warning"}
    if series is not None:
        event["series"] = {"count": series, "lastObservedTime": last}
    if core_view:
        event.update(apiVersion="v1", kind="Event", involvedObject=regarding, message="Back-off",
                     reportingComponent="kubelet")
    else:
        event.update(apiVersion="events.k8s.io/v1", kind="Event", regarding=regarding, note="Back-off")
    return event


def ns(text: str) -> int:
    return kubevents.traces._parse_time(text, "t")


def occurrences(*reports: tuple[dict[str, Any], bool]) -> tuple[list[list[int]], CaptureStats]:
    stats = CaptureStats()
    counts = capture_module._Counts(stats)
    return [[r["t_ns"] for r in counts.report(item, existing=existing)] for item, existing in reports], stats


def test_a_count_going_up_is_that_many_occurrences_at_the_last_timestamp() -> None:
    times, stats = occurrences(
        (core_event(4, "2024-01-01T00:01:00Z"), True),    # there before the capture: not captured
        (core_event(7, "2024-01-01T00:02:00Z"), False),   # 4 -> 7: three
        (core_event(6, "2024-01-01T00:01:50Z"), False),   # a stale view: nothing
        (core_event(7, "2024-01-01T00:02:00Z"), False),   # the same count again (a re-list): nothing
        (core_event(8, "2024-01-01T00:03:00Z"), False),
    )
    t2, t3 = ns("2024-01-01T00:02:00Z"), ns("2024-01-01T00:03:00Z")
    assert times == [[], [t2, t2, t2], [], [], [t3]]
    assert (stats.events, stats.occurrences, stats.existing) == (1, 4, 1)


def test_a_new_event_is_its_first_occurrence_at_its_first_timestamp() -> None:
    first, last = "2024-01-01T00:00:00Z", "2024-01-01T00:00:30Z"
    times, stats = occurrences((core_event(1, first, first=first), False),
                               (core_event(3, last, name="web-0.3", first=first), False))
    # An event first seen with count 3 (it was counted up while the watch was restarting): the first at its
    # firstTimestamp, the two others at its lastTimestamp.
    assert times == [[ns(first)], [ns(first), ns(last), ns(last)]]
    assert (stats.events, stats.occurrences, stats.existing) == (2, 4, 0)


@pytest.mark.parametrize("core_view", [False, True], ids=["events.k8s.io/v1", "core/v1 view"])
def test_a_series_count_going_up_is_that_many_occurrences_at_its_last_observed_time(core_view: bool) -> None:
    t5, t9 = "2024-01-01T00:05:00.500000Z", "2024-01-01T00:09:00.000001Z"
    times, stats = occurrences((v1_event(None, "", core_view=core_view), False),
                               (v1_event(2, t5, core_view=core_view), False),
                               (v1_event(5, t9, core_view=core_view), False))
    assert times == [[ns("2024-01-01T00:00:00.250000Z")], [ns(t5)], [ns(t9)] * 3]
    assert (stats.events, stats.occurrences) == (1, 5)


def test_the_records_are_those_of_from_kubectl() -> None:
    event = core_event(1, "2024-01-01T00:00:00Z", message="(combined from similar events): Back-off 3")
    [[record]] = [capture_module._Counts(CaptureStats()).report(event)]
    [expected] = list(kubevents.traces.from_kubectl([event]))
    assert record == expected and record["message"] == "Back-off 3"
    assert record["involved"] == {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "p1",
                                  "api_version": "v1", "resource_version": "", "field_path": ""}


def test_an_event_that_is_not_a_record_is_skipped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    bad = core_event(1, "2024-01-01T00:00:00Z")
    bad["count"] = "many"
    times, stats = occurrences((bad, False), (core_event(1, "2024-01-01T00:00:00Z", name="ok"), False))
    assert [len(t) for t in times] == [0, 1] and stats.skipped == 1
    assert "items" not in caplog.text and "event shop/web-0.1.count: expected an int, got str" in caplog.text


def test_records_are_written_in_time_order() -> None:
    reorder = capture_module._Reorder(window=10)
    at = [T0 + s for s in (0, 5, 3, 12, 11, 30)]
    out = []
    for t in at:
        reorder.push([{"t_ns": t * 10**9, "i": len(out)}])
        out += reorder.ready()
    # Held until the newest record is more than 10 s younger.
    assert [r["t_ns"] // 10**9 - T0 for r in out] == [0, 3, 5, 11, 12]
    assert [r["t_ns"] // 10**9 - T0 for r in reorder.rest()] == [30]


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("1h30m", 5400), ("1.5h", 5400),
                                           ("500ms", 0.5), ("45", 45), ("2.5", 2.5), ("1m0.5s", 60.5)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "-5", "10 m", "m", "5d", "1h-5m", "inf", "nan"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.4, 83.9, 600, 3725)] == ["0s", "1m23s", "10m0s", "1h2m5s"]


def test_bad_arguments_raise_before_anything_is_contacted(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.jsonl \(JSON Lines\) or \.parquet"):
        Capture(tmp_path / "t.csv")
    with pytest.raises(ValueError, match="api: expected one of core/v1, events.k8s.io/v1"):
        Capture(tmp_path / "t.jsonl", api="v1")
    with pytest.raises(ValueError, match="duration: expected seconds > 0"):
        Capture(tmp_path / "t.jsonl", duration=0)
    with pytest.raises(TypeError, match="duration"):
        Capture(tmp_path / "t.jsonl", duration="10m")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got a str"):
        Capture(tmp_path / "t.jsonl", namespaces="shop")
    with pytest.raises(ValueError, match="is not a namespace"):
        Capture(tmp_path / "t.jsonl", namespaces=["shop", ""])
    assert not list(tmp_path.iterdir())


# --- Captures from the fake API server ------------------------------------------------------------------------

def test_a_capture_replays_with_the_counts_it_watched(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    """Done when: a capture from the fake server, replayed by kubevents.simulate, has the counts the server
    counted while it ran, event by event; the events there before are left out."""
    workload = list(generate("mixed", 700, seed=3))
    record(cluster, workload[:100])  # before the capture: not captured, but their later counts are
    before, existing = stored_counts(cluster), len(cluster.core_v1.events)
    path = tmp_path / "capture.jsonl"
    progress = io.StringIO()
    running = RunningCapture(path, kubeconfig=kubeconfig, progress=progress)
    wait_for("the watch", watching(cluster))
    record(cluster, workload[100:])
    watched = stored_counts(cluster) - before
    running.until(watched.total())
    stats = running.stop()

    records = list(read_jsonl(path))
    assert trace_counts(records) == watched
    sim = kubevents.simulate(path)
    assert sim.totals["events"] == len(records) == stats.occurrences == watched.total() > 500
    assert stats.existing == existing
    assert stats.events == len(watched) and stats.skipped == stats.restarts == 0
    times = [r["t_ns"] for r in records]
    assert times == sorted(times)
    assert times[0] >= workload[100]["t_ns"] // 10**9 * 10**9 and times[-1] <= workload[-1]["t_ns"]
    lines = progress.getvalue().splitlines()
    assert lines[0] == f"kubevents capture: capturing core/v1 Events in all namespaces to {path} (Ctrl-C to stop)"
    assert lines[-1].startswith(f"kubevents capture: {stats.events} events, {stats.occurrences} occurrences, ")


def test_parquet(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "capture.parquet"
    running = RunningCapture(path, kubeconfig=kubeconfig)
    wait_for("the watch", watching(cluster))
    record(cluster, list(generate("storm", 200, seed=1)))
    running.until(stored_counts(cluster).total())
    stats = running.stop()
    table = read_parquet(path)
    assert table.num_rows == stats.occurrences == stored_counts(cluster).total()
    assert trace_counts(to_records(table)) == stored_counts(cluster)
    assert kubevents.simulate(table).totals["events"] == table.num_rows


def test_a_watch_restart_lists_again_without_counting_twice(cluster: FakeCluster, kubeconfig: str,
                                                            tmp_path: Path) -> None:
    """The server restarts (its watch cache starts over) while the capture's watch is down: the watch from the
    old resourceVersion is 410 Expired, the capture lists again and counts only what changed meanwhile."""
    workload = list(generate("identical", 600, seed=1))
    path = tmp_path / "capture.jsonl"
    running = RunningCapture(path, kubeconfig=kubeconfig)
    wait_for("the watch", watching(cluster))
    record(cluster, workload[:200])
    running.until(stored_counts(cluster).total())
    watch = cluster.core_v1.watch
    watch.pause()
    watch.expire()
    record(cluster, workload[200:400])  # while no watch is open
    watch.resume()
    wait_for("the second watch", watching(cluster, 2))
    record(cluster, workload[400:])
    running.until(stored_counts(cluster).total())
    stats = running.stop()
    records = list(read_jsonl(path))
    assert trace_counts(records) == stored_counts(cluster)
    assert stats.occurrences == len(records) == stored_counts(cluster).total()
    assert stats.restarts == 1
    assert watch.watches == 3  # the first, the one answered 410, and the one after the list


def test_ctrl_c_closes_the_file_then_raises(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    path = tmp_path / "capture.parquet"
    capture = Capture(path, kubeconfig=kubeconfig)
    storm = list(generate("storm", 100, seed=1))

    def interrupt() -> None:
        wait_for("the capture", capture.watching.is_set)
        record(cluster, storm)
        wait_for("the occurrences", lambda: capture.stats.occurrences == stored_counts(cluster).total())
        _thread.interrupt_main()  # Ctrl-C

    helper = threading.Thread(target=interrupt)
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            capture.run()
    finally:
        helper.join(WAIT)
    assert read_parquet(path).num_rows == capture.stats.occurrences == stored_counts(cluster).total() > 0


def test_the_server_ending_a_watch_is_no_restart(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    running = RunningCapture(tmp_path / "capture.jsonl", kubeconfig=kubeconfig)
    wait_for("the watch", watching(cluster))
    record(cluster, list(generate("storm", 40, seed=1)))
    cluster.core_v1.watch.end_watches()
    wait_for("the second watch", watching(cluster, 2))
    record(cluster, list(generate("storm", 80, seed=2))[40:])
    running.until(stored_counts(cluster).total())
    stats = running.stop()
    assert stats.occurrences == stored_counts(cluster).total() and stats.restarts == 0


def test_namespaces(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"
    progress = io.StringIO()
    running = RunningCapture(path, kubeconfig=kubeconfig, namespaces=["shop", "search", "shop"], progress=progress)
    wait_for("the watches", watching(cluster, 2))
    storm = list(generate("storm", 60, seed=1))
    for namespace in ("shop", "default", "search"):
        record(cluster, storm, namespace)
    expected = sum(e.get("count", 1) for (n, _), e in cluster.core_v1.events.items() if n != "default")
    running.until(expected)
    stats = running.stop()
    records = list(read_jsonl(path))
    assert {r["involved"]["namespace"] for r in records} == {"shop", "search"}
    assert len(records) == stats.occurrences == expected
    assert "capturing core/v1 Events in namespaces shop, search to" in progress.getvalue()


def test_events_k8s_io_v1(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    """Series counts through events.k8s.io/v1: a new event is one occurrence, series.count 2 one more, then
    5 three more, each at its lastObservedTime."""
    path = tmp_path / "capture.jsonl"
    running = RunningCapture(path, kubeconfig=kubeconfig, api="events.k8s.io/v1", namespaces=["shop"])
    wait_for("the watch", lambda: cluster.events_v1.watch.watches >= 1)
    with cluster.api_client() as client:
        sink = kubevents.EventsV1Sink(k8s.EventsV1Api(client))
        event = v1_event(None, "")
        del event["metadata"]["uid"]
        sink.create(event)
        for count, at in ((2, "2024-01-01T00:05:00.500000Z"), (5, "2024-01-01T00:09:00.000001Z")):
            sink.patch(event, json.dumps({"series": {"count": count, "lastObservedTime": at}}).encode())
    running.until(5)
    stats = running.stop()
    assert [r["t_ns"] for r in read_jsonl(path)] == [ns("2024-01-01T00:00:00.250000Z"), ns("2024-01-01T00:05:00.5Z")] \
        + [ns("2024-01-01T00:09:00.000001Z")] * 3
    assert (stats.events, stats.occurrences) == (1, 5)


def test_a_refusal_stops_the_capture(cluster: FakeCluster, tmp_path: Path) -> None:
    with cluster.api_client() as admin:
        core = k8s.CoreV1Api(admin)
        core.create_namespaced_service_account("shop", {"metadata": {"name": "no-rbac"}})
        token = json.loads(core.create_namespaced_service_account_token(
            "no-rbac", "shop", {"spec": {}}, _preload_content=False).data)["status"]["token"]
    with cluster.api_client(token) as client, pytest.raises(CaptureError) as refused:
        Capture(tmp_path / "t.jsonl", api_client=client, namespaces=["shop"]).run()
    assert refused.value.status == 403
    assert str(refused.value) == ('namespace shop: 403 Forbidden: events is forbidden: User '
                                  '"system:serviceaccount:shop:no-rbac" cannot list resource "events" in API group "" '
                                  'in the namespace "shop"')
    assert (tmp_path / "t.jsonl").read_text() == ""


def test_a_server_without_events_k8s_io_v1(tmp_path: Path) -> None:
    server = HTTPServer(threaded=True)
    server.start()
    fake = FakeCluster(server, serves_events_v1=False)
    try:
        with pytest.raises(CaptureError, match="all namespaces: 404 Not Found: 404 page not found"):
            Capture(tmp_path / "t.jsonl", api="events.k8s.io/v1", api_client=fake.api_client()).run()
    finally:
        fake.close()
        server.clear()
        server.stop()


def test_no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CaptureError, match="no cluster to capture from"):
        Capture(tmp_path / "t.jsonl", kubeconfig=tmp_path / "missing").run()
    assert not (tmp_path / "t.jsonl").exists()


# --- The command line -----------------------------------------------------------------------------------------

class Command:
    """``python -m kubevents capture ...`` as a subprocess, its stderr on a terminal (a pseudo-terminal)."""

    def __init__(self, *args: str) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "kubevents", "capture", *args], stdout=subprocess.PIPE,
                                     stderr=slave, text=True)
        os.close(slave)
        self._master = master
        self.stderr = ""

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        while text not in self.stderr:
            assert time.monotonic() < deadline, f"timed out waiting for {text!r}; stderr: {self.stderr!r}"
            if select.select([self._master], [], [], 0.1)[0]:
                try:
                    self.stderr += os.read(self._master, 65536).decode()
                except OSError:  # the process ended
                    assert text in self.stderr, self.stderr
                    return

    def finish(self, sig: int | None = None) -> tuple[int, str]:
        if sig is not None:
            self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=WAIT)
        while select.select([self._master], [], [], 0)[0]:
            try:
                chunk = os.read(self._master, 65536).decode()
            except OSError:
                break
            if not chunk:
                break
            self.stderr += chunk
        os.close(self._master)
        return self.proc.returncode, out


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_the_command_stops_cleanly_on_a_signal(cluster: FakeCluster, kubeconfig: str, tmp_path: Path, sig: int,
                                              code: int) -> None:
    path = tmp_path / "capture.parquet"
    command = Command("--kubeconfig", kubeconfig, str(path))
    command.wait_for("(Ctrl-C to stop)")
    record(cluster, list(generate("storm", 100, seed=1)))
    total = stored_counts(cluster).total()
    command.wait_for(f" events, {total} occurrences, ")  # the progress line, updated in place
    returncode, out = command.finish(sig)
    assert returncode == code, command.stderr
    assert "\r" in command.stderr and "\x1b[K" in command.stderr
    events = len(cluster.core_v1.events)
    assert re.fullmatch(f"kubevents capture: wrote {total} occurrences of {events} events in [0-9hms]+ "
                        f"\\(0 events were there before\\) to {re.escape(str(path))}\n", out), out
    assert kubevents.simulate(read_parquet(path)).totals["events"] == total


def test_the_command_ends_after_the_duration(cluster: FakeCluster, kubeconfig: str, tmp_path: Path) -> None:
    record(cluster, list(generate("storm", 30, seed=1)))
    path = tmp_path / "capture.jsonl"
    command = Command("--kubeconfig", kubeconfig, "--duration", "1s", "-n", "default", "--no-progress", str(path))
    returncode, out = command.finish()
    assert returncode == 0, command.stderr
    assert command.stderr == ""
    assert out.startswith("kubevents capture: wrote 0 occurrences of 0 events in ")
    assert out.endswith(f"(20 events were there before) to {path}\n")
    assert path.read_text() == ""


def test_the_command_when_the_server_refuses(cluster: FakeCluster, tmp_path: Path) -> None:
    config = json.loads(Path(cluster.kubeconfig(str(tmp_path / "kubeconfig"))).read_text())
    config["users"][0]["user"]["token"] = "not-a-token"
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    command = Command("--kubeconfig", str(tmp_path / "kubeconfig"), "--no-progress", str(tmp_path / "t.jsonl"))
    returncode, out = command.finish()
    assert returncode == 1
    assert command.stderr.strip() == "kubevents: all namespaces: 401 Unauthorized: Unauthorized"
    assert out == f"kubevents capture: wrote 0 occurrences of 0 events in 0s (0 events were there before) to " \
        f"{tmp_path / 't.jsonl'}\n"
