"""One home for each option: the defaults Python shows are the core's constants (``kubevents._native``), and a
bad value gets the core's wording wherever the option is taken."""

from __future__ import annotations

import inspect
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from pleg_fakes import FakeRuntime

import kubevents
from kubevents import _native
from kubevents.lab import DEFAULT_WINDOW, GRID_OPTIONS
from kubevents.pleg import EventChannel, EventedPLEG, GenericPLEG, PodCache
from kubevents.sinks import AsyncCoreV1Sink, CoreV1Sink, MemorySink

TRACE = [{"t_ns": 1_700_000_000 * 10**9, "involved": {"kind": "Pod", "namespace": "ns", "name": "p"},
          "type": "Normal", "reason": "R", "message": "m"}]

CORRELATOR = [("lru_cache_size", "DEFAULT_LRU_CACHE_SIZE"), ("burst", "DEFAULT_BURST"),
              ("max_events", "DEFAULT_MAX_EVENTS"), ("max_interval", "DEFAULT_MAX_INTERVAL")]

# (callable, keyword, the native constant its default must be)
SHOWN_DEFAULTS = [
    *[(kubevents.Correlator, k, c) for k, c in CORRELATOR],
    *[(kubevents.simulate, k, c) for k, c in CORRELATOR],
    *[(kubevents.Broadcaster, k, c) for k, c in CORRELATOR],
    (kubevents.Broadcaster, "max_tries", "DEFAULT_MAX_TRIES"),
    (kubevents.Broadcaster, "queue_length", "DEFAULT_QUEUE_LENGTH"),
    (kubevents.Broadcaster, "full_channel", "DEFAULT_FULL_CHANNEL"),
    (kubevents.Broadcaster.start_recording_to_sink, "workers", "DEFAULT_WORKERS"),
    (CoreV1Sink, "request_timeout", "DEFAULT_REQUEST_TIMEOUT"),
    (AsyncCoreV1Sink, "request_timeout", "DEFAULT_REQUEST_TIMEOUT"),
    (kubevents.sweep, "window", "DEFAULT_WINDOW"),
    (EventChannel, "capacity", "CHANNEL_CAPACITY"),
    (GenericPLEG, "channel_capacity", "CHANNEL_CAPACITY"),
    (GenericPLEG, "inspect_concurrency", "INSPECT_CONCURRENCY"),
    (EventedPLEG, "max_stream_retries", "EVENTED_MAX_STREAM_RETRIES"),
]


@pytest.mark.parametrize("call, keyword, constant", SHOWN_DEFAULTS,
                         ids=[f"{getattr(c, '__qualname__', c)}.{k}" for c, k, _ in SHOWN_DEFAULTS])
def test_a_shown_default_is_the_cores(call, keyword, constant):
    assert inspect.signature(call).parameters[keyword].default == getattr(_native, constant)


def test_the_cores_constants_are_client_gos_and_the_kubelets():
    # tools/record and tools/events (maxTriesPerEvent, defaultSleepDuration, maxQueuedEvents, the correlator's
    # defaults); the kubelet's PLEG (pleg/generic.go, pleg/evented.go).
    assert (_native.DEFAULT_MAX_TRIES, _native.DEFAULT_SLEEP_DURATION, _native.DEFAULT_QUEUE_LENGTH) == (12, 10.0, 1000)
    assert (_native.DEFAULT_LRU_CACHE_SIZE, _native.DEFAULT_BURST, _native.DEFAULT_MAX_EVENTS,
            _native.DEFAULT_MAX_INTERVAL, _native.DEFAULT_QPS) == (4096, 25, 10, 600, pytest.approx(1 / 300))
    assert (_native.DEFAULT_FULL_CHANNEL, _native.DEFAULT_WORKERS) == ("drop", 1)
    assert (_native.RELIST_PERIOD, _native.RELIST_THRESHOLD, _native.CHANNEL_CAPACITY) == (1.0, 180.0, 1000)
    assert (_native.EVENTED_RELIST_PERIOD, _native.EVENTED_RELIST_THRESHOLD, _native.EVENTED_MAX_STREAM_RETRIES,
            _native.EVENTED_CACHE_UPDATE_PERIOD) == (300.0, 600.0, 5, 2.0)
    assert GRID_OPTIONS == ("lru_cache_size", "burst", "qps", "max_events", "max_interval")
    assert DEFAULT_WINDOW == 60.0


def test_the_pleg_modules_defaults_are_what_the_plegs_do():
    cache = PodCache(evented=True)
    generic = GenericPLEG(FakeRuntime(), cache=cache, clock=kubevents.FakeClock(0))
    assert (generic.relist_period, generic.relist_threshold) == (kubevents.pleg.RELIST_PERIOD,
                                                                 kubevents.pleg.RELIST_THRESHOLD)
    assert generic.watch().capacity == kubevents.pleg.CHANNEL_CAPACITY == EventChannel().capacity
    EventedPLEG(generic)
    assert (generic.relist_period, generic.relist_threshold) == (kubevents.pleg.EVENTED_RELIST_PERIOD,
                                                                 kubevents.pleg.EVENTED_RELIST_THRESHOLD)


def test_a_sinks_request_timeout_defaults_to_the_cores():
    assert CoreV1Sink(object()).request_timeout == kubevents.sinks.DEFAULT_REQUEST_TIMEOUT == \
        _native.DEFAULT_REQUEST_TIMEOUT
    assert CoreV1Sink(object(), request_timeout=timedelta(minutes=1)).request_timeout == 60.0


def test_the_kopf_adapter_passes_every_broadcaster_option_and_shows_the_cores_defaults():
    pytest.importorskip("kopf")
    import kubevents.kopf

    options = kubevents.kopf.BroadcasterOptions.__optional_keys__
    assert options == set(inspect.signature(kubevents.Broadcaster).parameters)
    assert "name" in options
    assert inspect.signature(kubevents.kopf.install).parameters["workers"].default == _native.DEFAULT_WORKERS
    timeout = inspect.signature(kubevents.kopf.KopfSink).parameters["request_timeout"].default
    assert timeout == _native.DEFAULT_REQUEST_TIMEOUT


def message(call, exc=ValueError):
    with pytest.raises(exc) as e:
        call()
    return str(e.value)


def test_the_broadcasters_options_are_worded_by_the_core():
    b = kubevents.Broadcaster()
    try:
        assert message(lambda: b.start_recording_to_sink(MemorySink(), workers=0)) == \
            "workers must be >= 1, got 0"
        assert message(lambda: b.start_recording_to_sink(MemorySink(), workers=_native.MAX_WORKERS + 1)) == \
            f"workers must be <= {_native.MAX_WORKERS}, got {_native.MAX_WORKERS + 1}"
    finally:
        b.shutdown(timeout=10)
    assert message(lambda: kubevents.Broadcaster(max_tries=0)) == "max_tries must be >= 1, got 0"
    assert message(lambda: kubevents.Broadcaster(queue_length=0)) == "queue_length must be >= 1, got 0"
    assert message(lambda: kubevents.Broadcaster(sleep_duration=-1.5)) == \
        "sleep_duration must be >= 0 seconds, got -1.5"
    assert message(lambda: kubevents.Broadcaster(full_channel="block")) == \
        'full_channel must be "drop" or "wait", got "block"'


def test_a_request_timeout_is_worded_by_the_core_in_every_sink():
    expected = message(lambda: _native._request_timeout(0))
    assert expected == "request_timeout must be > 0 seconds, got 0"
    for sink in (CoreV1Sink, AsyncCoreV1Sink, kubevents.EventsV1Sink):
        assert message(lambda sink=sink: sink(object(), request_timeout=0)) == expected
    assert message(lambda: _native._request_timeout(True), TypeError) == \
        "request_timeout: expected seconds or a timedelta, got bool"


def test_the_plegs_durations_are_worded_by_the_core():
    def generic(**kw):
        return GenericPLEG(FakeRuntime(), cache=PodCache(evented=True), clock=kubevents.FakeClock(0), **kw)

    assert message(lambda: generic(relist_period=0)) == "relist_period must be > 0 seconds, got 0"
    assert message(lambda: generic().update(0, 1)) == "relist_period must be > 0 seconds, got 0"
    assert message(lambda: generic(relist_threshold=-2)) == "relist_threshold must be >= 0 seconds, got -2"
    assert message(lambda: EventedPLEG(generic(), relist_period=0)) == "relist_period must be > 0 seconds, got 0"
    assert message(lambda: EventedPLEG(generic(), fallback_relist_threshold=-1)) == \
        "fallback_relist_threshold must be >= 0 seconds, got -1"
    assert message(lambda: EventedPLEG(generic(), cache_update_period=0)) == \
        "cache_update_period must be > 0 seconds, got 0"
    assert message(lambda: generic(inspect_concurrency=0)) == "inspect_concurrency must be >= 1, got 0"
    assert message(lambda: EventChannel(0)) == "capacity must be >= 1, got 0"
    assert message(lambda: EventedPLEG(generic(), max_stream_retries=-1)) == \
        "max_stream_retries must be >= 0, got -1"


def test_the_labs_options_are_worded_by_the_core_with_or_without_an_executor():
    native = message(lambda: _native.replay_grid(TRACE, [{}], workers=0))
    assert native == "workers must be >= 1, got 0"
    with ThreadPoolExecutor(1) as ex:
        assert message(lambda: kubevents.sweep(TRACE, {"burst": [1]}, workers=0, executor=ex, progress=False)) == \
            native
        assert message(lambda: kubevents.sweep(TRACE, {"burst": [1]}, chunksize=0, executor=ex, progress=False)) == \
            "chunksize must be >= 1, got 0"
        grid_error = message(lambda: _native.replay_grid(TRACE, [{"brust": 1}]))
        assert grid_error.startswith('grid[0]: unknown option "brust"; the grid takes lru_cache_size, burst')
        assert message(lambda: kubevents.sweep(TRACE, {"brust": [1]}, executor=ex, progress=False)) == grid_error
        assert message(lambda: kubevents.sweep(TRACE, [{"burst": -1}], executor=ex, progress=False)) == \
            message(lambda: _native.replay_grid(TRACE, [{"burst": -1}])) == "grid[0]: burst must be >= 0, got -1"


def test_the_kopf_flush_timeout_is_worded_by_the_core():
    kopf = pytest.importorskip("kopf")
    import kubevents.kopf

    assert message(lambda: kubevents.kopf.install(kopf.OperatorSettings(), flush_timeout=0)) == \
        "flush_timeout must be > 0 seconds, got 0"
    assert message(lambda: kubevents.kopf.install(kopf.OperatorSettings(), flush_timeout="10"), TypeError) == \
        "flush_timeout: expected seconds or a timedelta, got str"
