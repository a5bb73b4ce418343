"""FakeClock, IntervalClock and Python clock objects as the correlator's clock."""

from __future__ import annotations

import datetime as dt

import pytest

import kubevents
from kubevents.testing import FakeClock, IntervalClock

UTC = dt.timezone.utc
NS = 10**9
POD = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}


def ev(message="m", reason="R", name="p"):
    return {"involvedObject": dict(POD, name=name), "source": {"component": "c"}, "type": "Normal",
            "reason": reason, "message": message, "count": 1,
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"}


def assert_utc(d: dt.datetime) -> None:
    assert isinstance(d, dt.datetime)
    assert d.tzinfo is not None and d.utcoffset() == dt.timedelta(0)


# --- FakeClock ----------------------------------------------------------------------------------------

def test_fake_clock_from_aware_datetime_converts_to_utc():
    c = FakeClock(dt.datetime(2024, 1, 1, 2, 0, 0, 250, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert c.now() == dt.datetime(2024, 1, 1, 0, 0, 0, 250, tzinfo=UTC)
    assert_utc(c.now())
    assert c.now_ns() == 1704067200 * NS + 250_000


def test_fake_clock_from_naive_datetime_is_utc():
    c = FakeClock(dt.datetime(2024, 1, 1, 0, 0, 1))
    assert c.now() == dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert c.now_ns() == 1704067201 * NS
    assert_utc(c.now())


def test_fake_clock_from_int_and_float_epoch_seconds():
    assert FakeClock(1_700_000_000).now_ns() == 1_700_000_000 * NS
    assert FakeClock(1_700_000_000).now() == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert FakeClock(1.5).now_ns() == 1_500_000_000
    assert FakeClock(1_700_000_000.25).now_ns() == 1_700_000_000_250_000_000
    assert FakeClock(0).now() == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert FakeClock(-1).now_ns() == -NS
    assert FakeClock(-1.5).now_ns() == -1_500_000_000
    assert FakeClock(-1.5).now() == dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=UTC)


def test_fake_clock_does_not_move_by_itself():
    c = FakeClock(1_700_000_000)
    assert [c.now_ns() for _ in range(3)] == [1_700_000_000 * NS] * 3
    assert c.now() == c.now()


def test_fake_clock_step_seconds_and_timedelta():
    c = FakeClock(1_700_000_000)
    r = c.step(10)
    assert r == dt.datetime(2023, 11, 14, 22, 13, 30, tzinfo=UTC)
    assert_utc(r)
    assert c.now_ns() == 1_700_000_010 * NS
    c.step(dt.timedelta(minutes=1, microseconds=3))
    assert c.now_ns() == 1_700_000_070 * NS + 3000
    c.step(0.5)
    assert c.now_ns() == 1_700_000_070 * NS + 3000 + NS // 2
    c.step(-70.5)
    assert c.now_ns() == 1_700_000_000 * NS + 3000
    c.step(dt.timedelta(microseconds=-3))
    assert c.now_ns() == 1_700_000_000 * NS


def test_fake_clock_now_ns_is_exact_to_the_nanosecond():
    c = FakeClock(1_700_000_000)
    c.step(1e-9)
    assert c.now_ns() == 1_700_000_000 * NS + 1
    c.step(0.295324396)
    assert c.now_ns() == 1_700_000_000_295_324_397
    # datetime has microseconds: now() truncates, now_ns() does not.
    assert c.now().microsecond == 295324


def test_fake_clock_set():
    c = FakeClock(0)
    c.set(dt.datetime(2024, 1, 1, tzinfo=UTC))
    assert c.now_ns() == 1704067200 * NS
    c.set(1_700_000_000)
    assert c.now_ns() == 1_700_000_000 * NS
    c.set(dt.datetime(2024, 1, 1, 1, 0))  # naive = UTC
    assert c.now() == dt.datetime(2024, 1, 1, 1, 0, tzinfo=UTC)
    c.set(2.5)
    assert c.now_ns() == 2_500_000_000


@pytest.mark.parametrize("bad", ["2024-01-01", [1], True])
def test_fake_clock_rejects_bad_start(bad):
    with pytest.raises(TypeError):
        FakeClock(bad)


def test_fake_clock_rejects_out_of_range_and_non_finite():
    with pytest.raises(ValueError):
        FakeClock(10**12)
    with pytest.raises(ValueError):
        FakeClock(float("nan"))
    with pytest.raises(TypeError):
        FakeClock(0).step("1s")


def test_testing_module_exports_the_native_clocks():
    assert kubevents.testing.FakeClock is kubevents.FakeClock
    assert kubevents.testing.IntervalClock is kubevents.IntervalClock


# --- IntervalClock ------------------------------------------------------------------------------------

def test_interval_clock_advances_before_each_read():
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    c = IntervalClock(start, 5)
    assert c.peek() == start
    assert c.now() == start + dt.timedelta(seconds=5)
    assert c.now() == start + dt.timedelta(seconds=10)
    assert c.peek() == start + dt.timedelta(seconds=10)
    assert c.peek() == start + dt.timedelta(seconds=10)
    assert_utc(c.now())


def test_interval_clock_with_timedelta_and_epoch_start():
    c = IntervalClock(1_700_000_000, dt.timedelta(milliseconds=250))
    assert c.now() == dt.datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)
    assert c.now() == dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)


def test_correlator_reads_the_clock_twice_per_event():
    # client-go: EventAggregate reads it once and the spam filter once (the scenario tests depend on it).
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    c = IntervalClock(start, 1)
    corr = kubevents.Correlator(clock=c)
    corr.correlate(ev())
    assert c.peek() == start + dt.timedelta(seconds=2)
    corr.update_state(ev())
    assert c.peek() == start + dt.timedelta(seconds=2)
    corr.correlate(ev())
    assert c.peek() == start + dt.timedelta(seconds=4)


def test_make_event_reads_the_interval_clock_once():
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    c = IntervalClock(start, 1)
    e = kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=c)
    assert e["firstTimestamp"] == "2024-01-01T00:00:01Z"
    assert c.peek() == start + dt.timedelta(seconds=1)


# --- Python clock objects -----------------------------------------------------------------------------

class CountingClock:
    def __init__(self, value):
        self.value = value
        self.calls = 0

    def now(self):
        self.calls += 1
        return self.value


@pytest.mark.parametrize("value", [
    dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 0, 0, 1),
    dt.datetime(2024, 1, 1, 1, 0, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    1704067201,
    1704067201.0,
])
def test_python_clock_object_drives_the_correlator(value):
    clock = CountingClock(value)
    c = kubevents.Correlator(clock=clock, max_events=2)
    c.correlate(ev("a"))
    r = c.correlate(ev("b"))
    assert clock.calls == 4
    assert r.aggregated
    # The aggregate is named and stamped with the aggregator's clock reading.
    assert r.event["metadata"]["name"] == "p.17a610173cffca00"
    assert r.event["firstTimestamp"] == r.event["lastTimestamp"] == "2024-01-01T00:00:01Z"


def test_python_clock_object_drives_the_spam_filter():
    clock = CountingClock(1000)
    c = kubevents.Correlator(clock=clock, burst=1, qps=1.0)
    assert c.correlate(ev()).skip is False
    assert c.correlate(ev()).skip is True
    clock.value = 1000.999
    assert c.correlate(ev()).skip is True
    clock.value = 1001
    assert c.correlate(ev()).skip is False


def test_python_clock_object_for_make_event():
    e = kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=CountingClock(1704067201))
    assert e["metadata"]["name"] == "p.17a610173cffca00"


class Boom(Exception):
    pass


def test_clock_exception_propagates_unchanged():
    boom = Boom("clock broke")

    class Broken:
        def now(self):
            raise boom

    c = kubevents.Correlator(clock=Broken())
    with pytest.raises(Boom) as info:
        c.correlate(ev())
    assert info.value is boom
    with pytest.raises(Boom) as info:
        kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=Broken())
    assert info.value is boom


def test_clock_exception_in_the_spam_filter_read_propagates():
    boom = Boom("second read")

    class FailsSecond:
        calls = 0

        def now(self):
            self.calls += 1
            if self.calls == 2:
                raise boom
            return 1_700_000_000

    c = kubevents.Correlator(clock=FailsSecond())
    with pytest.raises(Boom) as info:
        c.correlate(ev())
    assert info.value is boom


def test_clock_without_now_is_a_type_error():
    with pytest.raises(TypeError, match="now"):
        kubevents.Correlator(clock=object())
    with pytest.raises(TypeError):
        kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=42)


def test_clock_now_returning_a_bad_value_is_a_type_error():
    class Bad:
        def now(self):
            return "2024-01-01T00:00:00Z"

    c = kubevents.Correlator(clock=Bad())
    with pytest.raises(TypeError, match="now"):
        c.correlate(ev())


def test_real_clock_returns_aware_utc_datetimes():
    assert_utc(kubevents.RealClock().now())
    # The default clock of a correlator is the real one; it just has to work.
    assert kubevents.Correlator().correlate(ev()).skip is False
