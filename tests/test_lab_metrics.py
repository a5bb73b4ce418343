"""Simulation metrics (simulate(..., metrics=True)) on small traces whose numbers are worked out by hand."""

from __future__ import annotations

import pytest

import kubevents

NS = 10**9
T0 = 1_700_000_000 * NS


def rec(t_s, pod, reason, message):
    return {
        "t_ns": T0 + t_s * NS,
        "source_component": "kubelet",
        "source_host": "node-0",
        "involved": {"kind": "Pod", "namespace": "web", "name": pod, "uid": f"uid-{pod}", "api_version": "v1"},
        "type": "Warning",
        "reason": reason,
        "message": message,
    }


# burst 3, qps 1/300, max_events 3, window 10 s.
# Pod p, one message: 0 create, 1 patch (2), 2 patch (3), 3 and 4 skipped (the bucket is empty), 600 patch
# (count 6: the bucket refilled ~2 tokens), which reports the two skips 597 s and 596 s late.
# Pod q, four messages: a and b are created; c is the third distinct message, so it is aggregated (a new
# "(combined ...)" event, created); d is aggregated too and counted into that event, but the bucket is empty,
# so it is skipped, and nothing writes that event again: unreported.
TRACE = [
    rec(0, "p", "BackOff", "m"),
    rec(1, "p", "BackOff", "m"),
    rec(2, "p", "BackOff", "m"),
    rec(3, "p", "BackOff", "m"),
    rec(4, "p", "BackOff", "m"),
    rec(10, "q", "Unhealthy", "a"),
    rec(11, "q", "Unhealthy", "b"),
    rec(12, "q", "Unhealthy", "c"),
    rec(13, "q", "Unhealthy", "d"),
    rec(600, "p", "BackOff", "m"),
]
OPTIONS = {"burst": 3, "max_events": 3, "window": 10}


def test_decisions_are_the_ones_worked_out():
    sim = kubevents.simulate(TRACE, **OPTIONS)
    assert [d["action"] for d in sim.decisions()] == [
        "create", "patch", "patch", "skip", "skip", "create", "create", "create", "skip", "patch"]


def test_overall_metrics():
    m = kubevents.simulate(TRACE, metrics=True, **OPTIONS).metrics
    assert m == {
        "events": 10,
        "writes": 7,
        "creates": 4,
        "patches": 3,
        "write_reduction": pytest.approx(0.3),
        "spam_skipped": 3,
        "aggregated": 2,
        # (p,BackOff,m), (q,Unhealthy,a..d); c reached the API only inside a combined event, d not at all.
        "messages": 5,
        "messages_kept": 3,
        "message_share": pytest.approx(0.6),
        "reasons": 2,
        "reasons_kept": 2,
        "reason_share": 1.0,
        "delayed": 2,
        "unreported": 1,
        # (597 + 596) s over the 9 reported occurrences (written ones count as 0).
        "mean_delay_s": pytest.approx(1193 / 9),
        "max_delay_s": 597.0,
        # Writes at 0, 1, 2, 10 (or 2, 10, 11, 12) fall in one 10 s window, both ends included.
        "peak_writes": 4,
        "peak_write_rate": pytest.approx(0.4),
        # 61 windows of 10 s from the first event's to the last one's: [0, 10) and [10, 20) hold 3 writes
        # each, [600, 610) one, the other 58 none; ranks 31, 55 and 61.
        "p50_write_rate": 0.0,
        "p90_write_rate": 0.0,
        "p99_write_rate": pytest.approx(0.3),
        "peak_object_writes": 3,
        "peak_object_write_rate": pytest.approx(0.3),
        "max_count": 6,
    }


def test_per_object_metrics_sorted_by_writes():
    sim = kubevents.simulate(TRACE, metrics=True, per_object=True, **OPTIONS)
    p, q = sim.object_metrics()
    assert (p["name"], p["events"], p["writes"], p["spam_skipped"], p["delayed"], p["unreported"]) == ("p", 6, 4, 2, 2, 0)
    assert (p["max_count"], p["peak_writes"], p["max_delay_s"], p["message_share"]) == (6, 3, 597.0, 1.0)
    assert p["mean_delay_s"] == pytest.approx(1193 / 6)
    assert (q["name"], q["events"], q["writes"], q["aggregated"], q["unreported"]) == ("q", 4, 3, 2, 1)
    assert (q["messages"], q["messages_kept"], q["reasons_kept"], q["max_count"]) == (4, 2, 1, 1)
    assert "peak_object_writes" not in q
    assert sim.object_metrics(1) == [p]


def test_a_wider_window_sees_more_writes_at_once():
    m = kubevents.simulate(TRACE, metrics=True, burst=3, max_events=3, window=1000).metrics
    assert (m["peak_writes"], m["peak_write_rate"]) == (7, pytest.approx(0.007))


def test_metrics_from_a_file_equal_metrics_from_a_list(tmp_path):
    from kubevents.traces import generate, write_jsonl

    trace = generate("mixed", n=3000, seed=3)
    path = tmp_path / "mixed.jsonl"
    write_jsonl(trace, path)
    a = kubevents.simulate(trace, metrics=True, per_object=True, burst=5)
    b = kubevents.simulate(path, metrics=True, per_object=True, burst=5)
    assert a.metrics == b.metrics
    assert a.object_metrics() == b.object_metrics()
    # The totals and the metrics tell the same story.
    t, m = a.totals, a.metrics
    assert (m["creates"], m["patches"], m["spam_skipped"], m["aggregated"]) == (
        t["creates"], t["patches"], t["skips"], t["aggregated"])
    assert m["delayed"] + m["unreported"] == m["spam_skipped"]


def test_to_pandas():
    pd = pytest.importorskip("pandas")
    sim = kubevents.simulate(TRACE, metrics=True, per_object=True, **OPTIONS)
    overall = sim.to_pandas()
    assert isinstance(overall, pd.DataFrame)
    assert overall.to_dict("records") == [sim.metrics]
    objects = sim.to_pandas(objects=True)
    assert list(objects["name"]) == ["p", "q"]
    assert list(objects["writes"]) == [4, 3]


def test_metrics_must_be_asked_for():
    sim = kubevents.simulate(TRACE)
    with pytest.raises(TypeError, match="metrics=True"):
        sim.metrics
    with pytest.raises(TypeError, match="per_object=True"):
        kubevents.simulate(TRACE, metrics=True).object_metrics()


@pytest.mark.parametrize("window, exc, match", [
    (0, ValueError, "window must be > 0"),
    (-1.5, ValueError, "window must be > 0"),
    ("60", TypeError, "window: expected seconds"),
    (float("nan"), ValueError, "window"),
])
def test_bad_window(window, exc, match):
    with pytest.raises(exc, match=match):
        kubevents.simulate(TRACE, metrics=True, window=window)


_MEMORY = r"""
import resource, sys, kubevents
from kubevents.traces import generate
options = dict(metrics=True, correlators=sys.argv[1], lru_cache_size=int(sys.argv[2]))
kubevents.simulate(generate("unique", n=1000, seed=1), **options)  # everything loaded and warm
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m = kubevents.simulate(generate("unique", n=500_000, seed=1), **options).metrics
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, m["messages"])
"""


def grown_bytes_per_message(correlators, lru_cache_size):
    """Peak RSS grown by a replay of 500k distinct messages, measured in a child process."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _MEMORY, correlators, str(lru_cache_size)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    grown_kib, messages = map(int, p.stdout.split())
    assert messages == 500_000
    return grown_kib * 1024 / messages


def test_metrics_memory_per_distinct_message():
    """The metrics keep each distinct (object, reason, message): 500k of them (the `unique` workload) took
    about 350 MB, 700 bytes each; now about 170 MB."""
    assert grown_bytes_per_message("shared", 4096) < 500


def test_per_source_metrics_memory_per_distinct_message():
    """Per source (50 kubelets here), the merge adds each write's time and object and a table of the objects
    (about 165 bytes a message over the shared replay's); each source's own caches add up to 3 x 4,096
    entries, here kept small to measure the rest."""
    assert grown_bytes_per_message("per-source", 64) < 650
