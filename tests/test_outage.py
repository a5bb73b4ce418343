"""What an operator sees while the API server is down or refuses events, on both event APIs, on a FakeClock:
a line when writes start failing, at most one per ``log_interval`` while they fail, one when they recover, one
at shutdown; a line per event only at DEBUG. The README's "What an operator sees in an outage" shows these."""

import logging
import re
from pathlib import Path

import pytest

import kubevents
from kubevents.sinks import ApiError, MemorySink

from child import assert_clean, run

T0 = 1_704_067_200


class FlakySink(MemorySink):
    """Refuses connections while ``down``; rejects every write with ``status`` when it is set."""

    def __init__(self, status=None):
        super().__init__()
        self.down = True
        self.status = status

    def _fail(self):
        if self.status is not None:
            raise ApiError(self.status, "Forbidden", 'events is forbidden: User "ctl" cannot create resource')
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")

    def create(self, event):
        self._fail()
        return super().create(event)

    def patch(self, event, patch):
        self._fail()
        return super().patch(event, patch)


def pod(i):
    return {"kind": "Pod", "apiVersion": "v1", "namespace": "web", "name": f"api-{i}", "uid": f"u{i}"}


class CoreV1:
    """core/v1: a Broadcaster and its Recorder."""

    def __init__(self, clock, sink, **options):
        self.b = kubevents.Broadcaster(clock=clock, **options)
        self.b.start_recording_to_sink(sink)
        self.rec = self.b.new_recorder("ctl")

    def record(self, i):
        self.rec.eventf(pod(i), "Warning", "BackOff", "Back-off restarting failed container %d", i)


class EventsV1:
    """events.k8s.io/v1: an EventsBroadcaster and its EventsRecorder."""

    def __init__(self, clock, sink, **options):
        self.b = kubevents.EventsBroadcaster(clock=clock, **options)
        self.b.start_recording_to_sink(sink)
        self.rec = self.b.new_recorder("ctl", "ctl-1")

    def record(self, i):
        self.rec.eventf(pod(i), None, "Warning", "BackOff", "Restart", "Back-off restarting failed container %d", i)


APIS = [pytest.param(CoreV1, id="core/v1"), pytest.param(EventsV1, id="events.k8s.io/v1")]


def lines(caplog, level=logging.INFO):
    return [r.getMessage() for r in caplog.records if r.name == "kubevents" and r.levelno >= level]


def debug_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "kubevents" and r.levelno == logging.DEBUG]


def check_lines(shown, b, sink_class):
    label = f"{b.name}/sink-1 ({sink_class})"
    for line in shown:
        # Each names the broadcaster and the sink, and carries counts.
        assert b.name in line, line
        assert label in line or " shut down: " in line, line
        assert re.search(r"\d", line), line


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("sleep", [0.5, 10.0], ids=["retries-0.5s", "retries-10s"])
def test_a_60_s_outage_with_300_events_is_at_most_five_lines(api, sleep, caplog):
    clock = kubevents.FakeClock(T0)
    sink = FlakySink()
    p = api(clock, sink, sleep_duration=sleep, queue_length=2000)
    b = p.b
    with caplog.at_level(logging.DEBUG, logger="kubevents"):
        # 300 events over the 60 s outage, five a second.
        for step in range(120):
            for i in range(step * 5 // 2, (step + 1) * 5 // 2):
                p.record(i)
            clock.step(0.5)
            assert b.wait_idle(10)
            if step == 10:
                health = b.stats()["sinks"]["sink-1"]
                assert (health["up"], health["failing_since"]) == (False, "2024-01-01T00:00:00Z")
                assert health["last_error"]["type"] == "ConnectionRefusedError"
        sink.down = False
        for _ in range(60):
            clock.step(0.5)
            assert b.wait_idle(10)
        p.record(300)
        assert b.wait_idle(10)
        stats = b.shutdown(timeout=30)
    shown = lines(caplog)
    assert 3 <= len(shown) <= 5, "\n".join(shown)
    check_lines(shown, b, "FlakySink")
    assert shown[0].startswith(f"kubevents: sink {b.name}/sink-1 (FlakySink) failed to write an event: ")
    assert "Connection refused" in shown[0] and "retrying in" in shown[0]
    assert any(" recovered: writes failed for " in line for line in shown), "\n".join(shown)
    assert " shut down: 301 events received" in shown[-1]
    # Nothing is lost silently: every event given up was counted, and told at DEBUG.
    health = stats["sinks"]["sink-1"]
    given_up = sum(health["given_up"].values())
    assert given_up == stats["abandoned"]
    assert len([m for m in debug_lines(caplog) if " gave up an event " in m]) == given_up
    assert health["up"] and health["failing_since"] is None and health["last_success"] is not None
    written = {(e.get("involvedObject") or e["regarding"])["name"] for _, e in sink.writes}
    assert len(written) + given_up == 301
    if sleep == 10.0:
        # No event runs out of tries in 60 s at client-go's 10 s sleeps: everything is written.
        assert given_up == 0 and len(written) == 301


@pytest.mark.parametrize("api", APIS)
def test_1000_events_refused_with_403_are_at_most_three_lines(api, caplog):
    clock = kubevents.FakeClock(T0)
    sink = FlakySink(status=403)
    p = api(clock, sink, queue_length=2000)
    b = p.b
    with caplog.at_level(logging.DEBUG, logger="kubevents"):
        for i in range(1000):
            p.record(i)
        assert b.wait_idle(30)
        stats = b.shutdown(timeout=30)
    shown = lines(caplog)
    assert 1 <= len(shown) <= 3, "\n".join(shown)
    check_lines(shown, b, "FlakySink")
    assert "the event is given up (rejected (HTTP 403)): Pod web/api-0" in shown[0]
    assert "1000 events given up (1000 rejected (HTTP 403))" in shown[-1], shown[-1]
    assert stats["abandoned"] == 1000 and stats["sinks"]["sink-1"]["given_up"] == {"rejected (HTTP 403)": 1000}
    assert stats["created"] == 0
    assert len([m for m in debug_lines(caplog) if " gave up an event " in m]) == 1000


@pytest.mark.parametrize("api", APIS)
def test_the_interval_is_an_option(api, caplog):
    clock = kubevents.FakeClock(T0)
    sink = FlakySink()
    p = api(clock, sink, sleep_duration=1, log_interval=5)
    b = p.b
    with caplog.at_level(logging.INFO, logger="kubevents"):
        p.record(0)
        for _ in range(20):
            clock.step(1)
            assert b.wait_idle(10)
    # The first failure, then at most one line every 5 s while the event is retried.
    shown = lines(caplog)
    assert "further failures are summed up every 5.0 s" in shown[0]
    ages = [float(a) for a in re.findall(r" failing for (\d+(?:\.\d)?) s: ", "\n".join(shown[1:]))]
    assert len(ages) == len(shown) - 1 >= 3, shown
    assert all(later - earlier >= 5 for earlier, later in zip(ages, ages[1:])), ages
    b.shutdown(timeout=10)
    with pytest.raises(ValueError, match="log_interval must be > 0 seconds, got 0"):
        api(clock, sink, log_interval=0)


@pytest.mark.parametrize("api", APIS)
def test_a_healthy_shutdown_is_one_info_line(api, caplog):
    clock = kubevents.FakeClock(T0)
    p = api(clock, MemorySink())
    with caplog.at_level(logging.DEBUG, logger="kubevents"):
        p.record(0)
        p.b.shutdown(timeout=10)
    records = [r for r in caplog.records if r.name == "kubevents"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("INFO", f"kubevents: {p.b.name} shut down: 1 event received; every sink wrote all it was given")
    ]


def _numbers_masked(line):
    return re.sub(r"\d+(\.\d+)?", "N", line)


def _text_block(path):
    text = (Path(__file__).resolve().parent.parent / path).read_text()
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith(("WARNING ", "INFO "))]


@pytest.mark.parametrize("path", ["README.md", "docs/guides/outage.md"])
def test_the_documented_outage_is_what_the_log_shows(path, caplog):
    # The documents' scenario: a minute's outage, 300 warnings, client-go's default retries. The first sleep is
    # drawn at random, so the numbers vary from run to run; the lines do not.
    class CoreV1Sink(FlakySink):
        pass

    clock = kubevents.FakeClock(1_764_300_000)
    sink = CoreV1Sink()
    b = kubevents.Broadcaster(clock=clock, name="my-controller")
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("my-controller")
    with caplog.at_level(logging.INFO, logger="kubevents"):
        for step in range(120):
            for i in range(step * 5 // 2, (step + 1) * 5 // 2):
                rec.eventf(pod(i), "Warning", "BackOff", "Back-off restarting failed container %d", i)
            clock.step(0.5)
            assert b.wait_idle(10)
        sink.down = False
        for _ in range(60):
            clock.step(0.5)
            assert b.wait_idle(10)
        b.shutdown(timeout=10)
    shown = [f"{r.levelname} {r.getMessage().splitlines()[0]}" for r in caplog.records if r.name == "kubevents"]
    assert [_numbers_masked(line) for line in shown] == [_numbers_masked(line) for line in _text_block(path)]


@pytest.mark.parametrize("api", ["Broadcaster", "EventsBroadcaster"])
def test_the_exit_flush_is_one_summary_line(api):
    # Left running at exit, with a sink that refuses every write: the first refusal's line, then the exit
    # hook's one line, which counts what the sinks gave up while it flushed.
    new_recorder, eventf = {
        "Broadcaster": ('b.new_recorder("c")', 'r.eventf(pod, "Normal", "R", "m %d", i)'),
        "EventsBroadcaster": ('b.new_recorder("c", "i")', 'r.eventf(pod, None, "Normal", "R", "A", "m %d", i)'),
    }[api]
    p = run(f"""
        import logging, kubevents
        from kubevents.sinks import ApiError
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
        class Refusing:
            def create(self, e):
                raise ApiError(403, "Forbidden")
            def patch(self, e, p):
                raise ApiError(403, "Forbidden")
        b = kubevents.{api}(name="left-running")
        b.start_recording_to_sink(Refusing())
        r = {new_recorder}
        for i in range(5):
            pod = {{"kind": "Pod", "namespace": "ns", "name": f"p{{i}}", "uid": "u"}}
            {eventf}
    """)
    assert_clean(p)
    lines = [line for line in p.stderr.splitlines() if line.startswith(("WARNING ", "INFO "))]
    assert len(lines) == 2, p.stderr
    assert lines[0].startswith("WARNING kubevents: sink left-running/sink-1 (Refusing) failed to write an event")
    assert lines[1] == (
        "WARNING kubevents: at exit, 0 events could not be delivered within 5.0 s (none queued), 5 were given up "
        "by their sinks (left-running: 5); 0 sink or runtime calls were still running"
    )
