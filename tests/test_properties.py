"""Property tests of the correlator and of simulate (hypothesis)."""

from __future__ import annotations

import datetime as dt
import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

import kubevents
from kubevents.testing import FakeClock

NS = 10**9
T0 = 1_700_000_000 * NS
MAX_I64 = 2**63 - 1
SETTINGS = settings(max_examples=100, deadline=None)


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def set_ns(clock: FakeClock, ns: int) -> None:
    clock.set(ns // NS)
    clock.step((ns % NS) / 1e9)
    assert clock.now_ns() == ns


def stamp(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns // NS, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# Small alphabets so keys repeat often.
occurrence = st.fixed_dictionaries({
    "dt_ms": st.integers(0, 5_000),
    "pod": st.sampled_from(["a", "b", "c"]),
    "type": st.sampled_from(["Normal", "Warning"]),
    "reason": st.sampled_from(["R1", "R2"]),
    "message": st.sampled_from(["m0", "m1", "m2", "m3", ""]),
    "container": st.sampled_from(["", "spec.containers{x}"]),
    "host": st.sampled_from(["", "h"]),
})


def to_event(o: dict, t_ns: int) -> dict:
    ref = {"kind": "Pod", "namespace": "ns", "name": o["pod"], "uid": "uid-" + o["pod"], "apiVersion": "v1"}
    if o["container"]:
        ref["fieldPath"] = o["container"]
    return {
        "involvedObject": ref,
        "source": {"component": "kubelet", "host": o["host"]},
        "type": o["type"], "reason": o["reason"], "message": o["message"], "count": 1,
        "firstTimestamp": stamp(t_ns), "lastTimestamp": stamp(t_ns),
    }


def event_key(e: dict) -> str:
    src, r = e.get("source") or {}, e["involvedObject"]
    return "".join([src.get("component", ""), src.get("host", ""), r.get("kind", ""), r.get("namespace", ""),
                    r.get("name", ""), r.get("fieldPath", ""), r.get("uid", ""), r.get("apiVersion", ""),
                    e.get("type", ""), e.get("reason", ""), e.get("message", "")])


def spam_key(e: dict) -> str:
    src, r = e.get("source") or {}, e["involvedObject"]
    return "".join([src.get("component", ""), src.get("host", ""), r.get("kind", ""), r.get("namespace", ""),
                    r.get("name", ""), r.get("uid", ""), r.get("apiVersion", ""), e.get("type", "")])


def aggregate_key(e: dict) -> str:
    src, r = e.get("source") or {}, e["involvedObject"]
    return "".join([src.get("component", ""), src.get("host", ""), r.get("kind", ""), r.get("namespace", ""),
                    r.get("name", ""), r.get("uid", ""), r.get("apiVersion", ""), e.get("type", ""),
                    e.get("reason", ""), e.get("reportingComponent", ""), e.get("reportingInstance", "")])


class GoBucket:
    """golang.org/x/time/rate's Limiter as the spam filter uses it (AllowN(now, 1))."""

    def __init__(self, burst: int):
        self.tokens = float(burst)
        self.last = None

    def allow(self, now: int, limit: float, burst: int) -> bool:
        if self.last is None:
            elapsed = MAX_I64
        elif now < self.last:
            elapsed = 0
        else:
            elapsed = now - self.last
        sec, nsec = elapsed // NS, elapsed % NS
        tokens = self.tokens + (float(sec) + nsec / 1e9) * limit
        tokens = min(tokens, float(burst))
        tokens -= 1.0
        ok = tokens >= 0 or int((-tokens / limit) * 1e9) <= 0
        ok = ok and burst >= 1
        if ok:
            self.last, self.tokens = now, tokens
        return ok


def replay(occurrences, **options):
    """Correlates the occurrences on a FakeClock the way recordToSink does; yields (t_ns, input, result)."""
    clock = FakeClock(0)
    c = kubevents.Correlator(clock=clock, **options)
    t = T0
    for o in occurrences:
        t += o["dt_ms"] * 1_000_000
        set_ns(clock, t)
        e = to_event(o, t)
        r = c.correlate(dict(e))
        if not r.skip:
            c.update_state(r.event)
        yield t, e, r


# (a) ---------------------------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(occurrence, min_size=1, max_size=60), st.integers(1, 5), st.integers(0, 20),
       st.sampled_from([0.5, 1.0, 1 / 300]))
def test_count_per_key_never_decreases_and_counts_every_observation(occurrences, max_events, max_interval, qps):
    observed: dict = {}
    last_count: dict = {}
    for _, e, r in replay(occurrences, max_events=max_events, max_interval=max_interval, burst=3, qps=qps):
        # The observer counts an aggregate under its aggregate key, anything else under getEventKey. Both live in
        # one cache and are joined without separators, so they can be the same string (an event with no message
        # and no fieldPath keys exactly like its aggregate); Go counts them together and so must the model.
        key = aggregate_key(e) if r.aggregated else event_key(e)
        observed[key] = observed.get(key, 0) + 1
        if r.skip:
            continue
        count = r.event["count"]
        assert count >= last_count.get(key, 0)
        assert count == observed[key]
        assert (r.patch is None) == (count == 1)
        last_count[key] = count


# (b) ---------------------------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(occurrence, min_size=1, max_size=80), st.integers(1, 5),
       st.sampled_from([0.5, 1.0, 2.0, 0.1, 1 / 300, 0.3]))
def test_spam_filter_never_exceeds_burst_plus_refill(occurrences, burst, qps):
    limit = f32(qps)
    first: dict = {}
    accepted: dict = {}
    for t, e, r in replay(occurrences, burst=burst, qps=qps):
        k = spam_key(e)
        first.setdefault(k, t)
        if r.skip:
            continue
        accepted[k] = accepted.get(k, 0) + 1
        elapsed = (t - first[k]) / 1e9
        assert accepted[k] <= burst + elapsed * limit + 1e-9, (k, accepted[k], elapsed)


@SETTINGS
@given(st.lists(occurrence, min_size=1, max_size=80), st.integers(1, 5),
       st.sampled_from([0.5, 1.0, 2.0, 0.1, 1 / 300, 0.3]))
def test_spam_decisions_equal_the_go_token_bucket(occurrences, burst, qps):
    limit = f32(qps)
    buckets: dict = {}
    for t, e, r in replay(occurrences, burst=burst, qps=qps):
        b = buckets.setdefault(spam_key(e), GoBucket(burst))
        assert r.skip == (not b.allow(t, limit, burst))


# (c) ---------------------------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), st.text(max_size=20), st.integers(0, 100_000)), min_size=1,
                max_size=40),
       st.integers(1, 4))
def test_every_patch_is_json_with_count_and_known_keys(items, max_events):
    clock = FakeClock(0)
    c = kubevents.Correlator(clock=clock, max_events=max_events, burst=1000, qps=1000.0)
    t = T0
    ref = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}
    for which, message, dt_ms in items:
        t += dt_ms * 1_000_000
        set_ns(clock, t)
        e = {"involvedObject": ref, "source": {"component": "k"}, "type": "Normal", "reason": f"R{which}",
             "message": message, "count": 1, "firstTimestamp": stamp(t), "lastTimestamp": stamp(t)}
        r = c.correlate(e)
        assert not r.skip
        c.update_state(r.event)
        if r.patch is None:
            assert r.event["count"] == 1
            continue
        patch = json.loads(r.patch.decode("utf-8"))
        assert set(patch) <= {"count", "lastTimestamp", "message"}
        assert "count" in patch
        assert patch["count"] == r.event["count"] > 1
        assert patch.get("lastTimestamp") == r.event["lastTimestamp"]
        assert patch.get("message", "") == r.event.get("message", "")
        # Keys sorted, no spaces, as Go's json.Marshal of the patch map writes them.
        text = r.patch.decode("utf-8")
        assert text == "{" + ",".join(
            json.dumps(k) + ":" + _go_json(v) for k, v in sorted(patch.items())) + "}"


def _go_json(v) -> str:
    if isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
        for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                        ("\u2029", "\\u2029")):
            s = s.replace(ch, esc)
        return s
    return json.dumps(v)


# (d) ---------------------------------------------------------------------------------------------------

def to_record(o: dict, t_ns: int) -> dict:
    involved = {"kind": "Pod", "namespace": "ns", "name": o["pod"], "uid": "uid-" + o["pod"], "api_version": "v1"}
    if o["container"]:
        involved["field_path"] = o["container"]
    return {"t_ns": t_ns, "source_component": "kubelet", "source_host": o["host"], "involved": involved,
            "type": o["type"], "reason": o["reason"], "message": o["message"]}


@SETTINGS
@given(st.lists(occurrence, max_size=80), st.integers(0, 5), st.integers(0, 5), st.booleans())
def test_simulate_totals_add_up(occurrences, burst, max_events, per_object):
    t = T0
    trace = []
    for o in occurrences:
        t += o["dt_ms"] * 1_000_000
        trace.append(to_record(o, t))
    sim = kubevents.simulate(trace, burst=burst, max_events=max_events, per_object=per_object)
    tot = sim.totals
    assert tot["creates"] + tot["patches"] + tot["skips"] == tot["events"]
    assert tot["events"] == len(trace)
    assert 0 <= tot["aggregated"] <= tot["events"]
    decisions = list(sim.decisions())
    assert [d["index"] for d in decisions] == list(range(len(trace)))
    for action, total in (("create", "creates"), ("patch", "patches"), ("skip", "skips")):
        assert sum(d["action"] == action for d in decisions) == tot[total]
    if per_object:
        objects = sim.top_objects(100)
        assert sum(o["events"] for o in objects) == tot["events"]
        assert sum(o["writes"] for o in objects) == tot["creates"] + tot["patches"]
