"""Limits on what input can cost: huge sizes and capacities cost nothing until used (or are refused with a
ValueError naming the option and its limit), and an int option out of range is a ValueError naming it, never
pyo3's bare OverflowError."""

import os
import subprocess
import sys
import textwrap

import pytest

import kubevents
from kubevents._native import replay_grid
from kubevents.pleg import EventChannel, EventedPLEG, GenericPLEG, PodCache
from kubevents.sinks import MemorySink

POD = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}
TRACE = [{"t_ns": 1_700_000_000 * 10**9 + i * 10**9, "involved": {"kind": "Pod", "namespace": "ns", "name": "p"},
          "type": "Normal", "reason": "R", "message": "m"} for i in range(3)]


class Runtime:
    def get_pods(self):
        return [("uid-1", "web-0", "default", [("c1", "running")], [])]

    def get_pod_status(self, pod):
        return {"id": pod["id"]}


def generic(**kw):
    return GenericPLEG(Runtime(), cache=PodCache(), clock=kubevents.FakeClock(0), **kw)


def start_recording(workers):
    b = kubevents.Broadcaster()
    try:
        b.start_recording_to_sink(MemorySink(), workers=workers)
    finally:
        b.shutdown(timeout=10)


def simulation():
    return kubevents.simulate(TRACE, per_object=True, metrics=True)


# --- huge sizes and capacities --------------------------------------------------------------------------

# Each builds an object with a huge size and uses it, in a child with 3 GiB of address space: it must work
# without reserving memory for the size, or be refused as in _REFUSED.
_USE = {
    "EventsBroadcaster.cache_size": """
        clock = kubevents.FakeClock(0)
        sink = MemorySink()
        b = kubevents.EventsBroadcaster(clock=clock, cache_size=SIZE)
        b.start_recording_to_sink(sink)
        rec = b.new_recorder("ctl", "host")
        for reason in ("a", "a", "b"):
            clock.step(1)
            rec.eventf(POD, None, "Normal", reason, "act", "note")
        b.wait_idle()
        assert [op for op, _ in sink.writes] == ["create", "patch", "create"], sink.writes
        assert b.stats()["cache_len"] == 2
        b.shutdown(timeout=10)
    """,
    "Correlator.lru_cache_size": """
        c = kubevents.Correlator(lru_cache_size=SIZE, clock=kubevents.FakeClock(0))
        c.correlate({"involvedObject": {"name": "p"}, "count": 1})
    """,
    "Broadcaster.lru_cache_size": "kubevents.Broadcaster(lru_cache_size=SIZE).shutdown()",
    "simulate.lru_cache_size": "kubevents.simulate(TRACE, lru_cache_size=SIZE)",
    "sweep.lru_cache_size": "kubevents.sweep(TRACE, {'lru_cache_size': [SIZE]}, progress=False)",
    "Broadcaster.queue_length": """
        sink = MemorySink()
        with kubevents.Broadcaster(queue_length=SIZE) as b:
            b.start_recording_to_sink(sink)
            b.new_recorder("ctl").event(POD, "Normal", "R", "m")
        assert len(sink) == 1
    """,
    "EventChannel.capacity": "assert EventChannel(SIZE).capacity == SIZE",
    "GenericPLEG.channel_capacity": """
        pleg = generic(channel_capacity=SIZE)
        pleg.relist()
        assert len(pleg.watch().drain()) == 1
    """,
    "GenericPLEG.inspect_concurrency": "generic(inspect_concurrency=SIZE).relist()",
    "EventedPLEG.max_stream_retries": "EventedPLEG(generic(), max_stream_retries=SIZE)",
}

# The correlator's LRU links its entries by u32 index.
_REFUSED = {
    "Correlator.lru_cache_size": "lru_cache_size must be at most 4294967294",
    "Broadcaster.lru_cache_size": "lru_cache_size must be at most 4294967294",
    "simulate.lru_cache_size": "lru_cache_size must be at most 4294967294",
    "sweep.lru_cache_size": "grid[0]: lru_cache_size must be at most 4294967294",
    "EventedPLEG.max_stream_retries": "max_stream_retries must be <= 4294967295",
}

_CHILD = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import kubevents
from kubevents.pleg import EventChannel, EventedPLEG, GenericPLEG, PodCache
from kubevents.sinks import MemorySink
from test_limits import POD, TRACE, generic
SIZE = {size}
try:
{code}
except ValueError as e:
    print("ValueError:", e)
else:
    print("ok")
"""


@pytest.mark.parametrize("size", [2**32, 2**40, 2**62], ids=["2**32", "2**40", "2**62"])
@pytest.mark.parametrize("what", list(_USE))
def test_a_huge_size_costs_nothing_until_used(what, size):
    code = textwrap.indent(textwrap.dedent(_USE[what]).strip(), "    ")
    r = subprocess.run([sys.executable, "-c", _CHILD.format(size=size, code=code)], capture_output=True,
                       text=True, timeout=60, cwd=os.path.dirname(__file__))
    assert r.returncode == 0, r.stderr
    expected = f"ValueError: {_REFUSED[what]}, got {size}" if what in _REFUSED else "ok"
    assert r.stdout == expected + "\n"


def test_a_refused_huge_size_names_its_limit():
    with pytest.raises(ValueError, match="lru_cache_size must be at most 4294967294, got 4294967296"):
        kubevents.Correlator(lru_cache_size=2**32)
    with pytest.raises(ValueError, match="max_stream_retries must be <= 4294967295, got 4294967296"):
        EventedPLEG(generic(), max_stream_retries=2**32)


def test_more_tries_than_a_u32_holds_are_taken():
    kubevents.EventsBroadcaster(max_tries=2**40).shutdown()
    kubevents.Broadcaster(max_tries=2**40).shutdown()


# --- int options out of range ---------------------------------------------------------------------------

# (label, option named in the error, call with the value)
_INT_OPTIONS = [
    *[(f"Correlator.{o}", o, lambda v, o=o: kubevents.Correlator(**{o: v}))
      for o in ("lru_cache_size", "burst", "max_events", "max_interval")],
    *[(f"Broadcaster.{o}", o, lambda v, o=o: kubevents.Broadcaster(**{o: v}))
      for o in ("max_tries", "queue_length", "lru_cache_size", "burst", "max_events", "max_interval")],
    ("Broadcaster.start_recording_to_sink.workers", "workers", start_recording),
    *[(f"simulate.{o}", o, lambda v, o=o: kubevents.simulate(TRACE, **{o: v}))
      for o in ("lru_cache_size", "burst", "max_events", "max_interval")],
    ("Simulation.top_objects.n", "n", lambda v: simulation().top_objects(v)),
    ("Simulation.object_metrics.n", "n", lambda v: simulation().object_metrics(v)),
    ("replay_grid.workers", "workers", lambda v: replay_grid(TRACE, [{}], workers=v)),
    *[(f"replay_grid.grid.{o}", rf"grid\[0\]: {o}", lambda v, o=o: replay_grid(TRACE, [{o: v}]))
      for o in ("lru_cache_size", "burst", "max_events", "max_interval")],
    ("sweep.workers", "workers", lambda v: kubevents.sweep(TRACE, {"burst": [1]}, workers=v, progress=False)),
    ("sweep.grid", r"grid\[0\]: burst", lambda v: kubevents.sweep(TRACE, {"burst": [v]}, progress=False)),
    *[(f"EventsBroadcaster.{o}", o, lambda v, o=o: kubevents.EventsBroadcaster(**{o: v}))
      for o in ("max_tries", "cache_size", "queue_length", "seed")],
    ("EventChannel.capacity", "capacity", EventChannel),
    ("GenericPLEG.channel_capacity", "channel_capacity", lambda v: generic(channel_capacity=v)),
    ("GenericPLEG.inspect_concurrency", "inspect_concurrency", lambda v: generic(inspect_concurrency=v)),
    ("EventedPLEG.max_stream_retries", "max_stream_retries", lambda v: EventedPLEG(generic(), max_stream_retries=v)),
    ("FakeClock.start", "start", kubevents.FakeClock),
    ("FakeClock.step", "seconds", lambda v: kubevents.FakeClock(0).step(v)),
    ("FakeClock.set", "t", lambda v: kubevents.FakeClock(0).set(v)),
    ("IntervalClock.start", "start", lambda v: kubevents.IntervalClock(v, 1)),
    ("IntervalClock.interval", "interval", lambda v: kubevents.IntervalClock(0, v)),
]


@pytest.mark.parametrize("value", [2**64, 2**200, -2**64, 2**2000], ids=["2**64", "2**200", "-2**64", "2**2000"])
@pytest.mark.parametrize("call, option", [pytest.param(c, o, id=label) for label, o, c in _INT_OPTIONS])
def test_an_int_option_out_of_range_is_a_value_error_naming_it(call, option, value):
    with pytest.raises(ValueError, match=rf"^{option}\b"):
        call(value)


def test_int_option_messages():
    def message(call, value):
        with pytest.raises(ValueError) as e:
            call(value)
        return str(e.value)

    assert message(lambda v: kubevents.Broadcaster(queue_length=v), 0) == "queue_length must be >= 1, got 0"
    assert message(lambda v: kubevents.Correlator(burst=v), -1) == "burst must be >= 0, got -1"
    assert message(lambda v: kubevents.Broadcaster(queue_length=v), 2**100) == \
        "queue_length is too large: 1267650600228229401496703205376"
    assert message(lambda v: kubevents.Correlator(burst=v), -2**64) == "burst is too small: -18446744073709551616"
    # Beyond the digits str() shows.
    assert message(lambda v: kubevents.Correlator(burst=v), 10**5000) == "burst is too large: an int of 16610 bits"


def test_replay_grid_refuses_fewer_than_one_worker():
    for workers in (-1, 0):
        with pytest.raises(ValueError, match=f"^workers must be >= 1, got {workers}$"):
            replay_grid(TRACE, [{}], workers=workers)
    assert len(replay_grid(TRACE, [{}], workers=None)) == 1


def test_an_int_option_of_another_type_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="^burst must be an int, got float"):
        kubevents.Correlator(burst=1.5)
    with pytest.raises(TypeError, match="^workers must be an int, got str$"):
        replay_grid(TRACE, [{}], workers="2")
    with pytest.raises(TypeError, match="^seed must be an int, got float"):
        kubevents.EventsBroadcaster(seed=1.0)


def test_int_options_take_what_they_took():
    # Anything with __index__, bools included, as pyo3's own extraction took them; None where it is the default.
    class Index:
        def __index__(self):
            return 3

    kubevents.Correlator(burst=Index(), max_events=True)
    kubevents.EventsBroadcaster(seed=2**64 - 1, cache_size=Index()).shutdown()
    sim = simulation()
    assert len(sim.top_objects(Index())) == 1 and len(sim.object_metrics(None)) == 1
    with pytest.raises(TypeError, match=r"grid\[0\]: burst must be an int, got bool"):
        replay_grid(TRACE, [{"burst": True}])
