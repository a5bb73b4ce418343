"""Bad input: each error has the right class and names what is wrong. And Unicode goes through intact."""

from __future__ import annotations

import copy
import json

import pytest

import kubevents
from kubevents.testing import FakeClock

NS = 10**9
T0 = 1_700_000_000 * NS
REF = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}


def ev(**fields):
    e = {"involvedObject": dict(REF), "source": {"component": "c"}, "type": "Normal", "reason": "R",
         "message": "m", "count": 1, "firstTimestamp": "2024-01-01T00:00:00Z",
         "lastTimestamp": "2024-01-01T00:00:00Z"}
    e.update(fields)
    return e


def record(i=0, **fields):
    r = {"t_ns": T0 + i * NS, "source_component": "kubelet", "source_host": "n",
         "involved": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "api_version": "v1"},
         "type": "Normal", "reason": "R", "message": "m"}
    r.update(fields)
    return r


@pytest.fixture
def corr():
    return kubevents.Correlator(clock=FakeClock(1_700_000_000))


# --- correlate / update_state -------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [None, 42, "event", [("involvedObject", {})], b"{}"])
def test_non_dict_is_a_type_error(corr, bad):
    with pytest.raises(TypeError):
        corr.correlate(bad)
    with pytest.raises(TypeError):
        corr.update_state(bad)


def test_missing_involved_object_is_a_value_error_naming_it(corr):
    e = ev()
    del e["involvedObject"]
    with pytest.raises(ValueError, match="involvedObject"):
        corr.correlate(e)
    with pytest.raises(ValueError, match="involvedObject"):
        corr.update_state(e)


def test_count_of_the_wrong_type_is_a_type_error_naming_count(corr):
    with pytest.raises(TypeError, match="count"):
        corr.correlate(ev(count="x"))


@pytest.mark.parametrize("field, value", [
    ("metadata", {"name": 5}),
    ("involvedObject", {"name": 5}),
    ("reason", 3.5),
    ("metadata", {"annotations": {"a": 1}}),
])
def test_string_field_of_the_wrong_type_is_a_type_error_naming_it(corr, field, value):
    with pytest.raises(TypeError, match=field):
        corr.correlate(ev(**{field: value}))


@pytest.mark.parametrize("count", [2**40, 2**31, -(2**31) - 1])
def test_count_out_of_int32_is_a_value_error(corr, count):
    with pytest.raises(ValueError, match="count"):
        corr.correlate(ev(count=count))


def test_count_at_the_int32_limits_is_accepted(corr):
    r = corr.correlate(ev(count=2**31 - 1))
    assert r.event["count"] == 2**31 - 1


@pytest.mark.parametrize("field", ["lastTimestamp", "firstTimestamp", "eventTime"])
def test_unparsable_timestamp_is_a_value_error_naming_it(corr, field):
    with pytest.raises(ValueError, match=field):
        corr.correlate(ev(**{field: "yesterday"}))
    with pytest.raises(ValueError, match=field):
        corr.update_state(ev(**{field: "yesterday"}))


def test_timestamp_out_of_range_is_a_value_error(corr):
    with pytest.raises(ValueError, match="lastTimestamp"):
        corr.correlate(ev(lastTimestamp="2300-01-01T00:00:00Z"))


def test_null_fields_are_empty(corr):
    r = corr.correlate({"involvedObject": {"name": "x", "fieldPath": None}, "count": None, "source": None,
                        "metadata": None, "message": None, "lastTimestamp": None, "firstTimestamp": ""})
    assert r.event["involvedObject"] == {"name": "x"}
    assert "count" not in r.event and "message" not in r.event
    assert r.event["lastTimestamp"] is None and r.event["firstTimestamp"] is None


def test_bad_input_leaves_the_correlator_usable(corr):
    with pytest.raises(TypeError):
        corr.correlate(7)
    with pytest.raises(ValueError):
        corr.correlate(ev(lastTimestamp="nope"))
    assert corr.correlate(ev()).event["count"] == 1
    assert corr.correlate(ev()).event["count"] == 2


# --- options and key functions ------------------------------------------------------------------------

@pytest.mark.parametrize("option, value", [
    ("burst", -1), ("qps", -0.5), ("lru_cache_size", -1), ("max_events", -1), ("max_interval", -1),
    ("qps", float("nan")), ("qps", float("inf")),
])
def test_negative_or_non_finite_options_are_value_errors(option, value):
    with pytest.raises(ValueError, match=option):
        kubevents.Correlator(**{option: value})
    with pytest.raises(ValueError, match=option):
        kubevents.simulate([], **{option: value})


@pytest.mark.parametrize("option", ["key_func", "message_func", "spam_key_func"])
def test_non_callable_key_function_is_a_type_error(option):
    with pytest.raises(TypeError, match=option):
        kubevents.Correlator(**{option: "not callable"})


@pytest.mark.parametrize("kwargs, name", [
    (dict(key_func=lambda e: "just a str"), "key_func"),
    (dict(key_func=lambda e: ("a",)), "key_func"),
    (dict(key_func=lambda e: ("a", 1)), "key_func"),
    (dict(spam_key_func=lambda e: b"bytes"), "spam_key_func"),
    (dict(spam_key_func=lambda e: None), "spam_key_func"),
    (dict(max_events=1, message_func=lambda e: 42), "message_func"),
])
def test_key_function_returning_the_wrong_type_is_a_type_error(kwargs, name):
    c = kubevents.Correlator(clock=FakeClock(0), **kwargs)
    with pytest.raises(TypeError, match=name):
        c.correlate(ev())
    with pytest.raises(TypeError, match=name):
        kubevents.simulate([record()], **kwargs)


class Boom(Exception):
    pass


@pytest.mark.parametrize("option", ["key_func", "message_func", "spam_key_func"])
def test_key_function_exception_propagates_unchanged(option):
    boom = Boom(option)

    def raiser(e):
        raise boom

    extra = {"max_events": 1} if option == "message_func" else {}
    c = kubevents.Correlator(clock=FakeClock(0), **{option: raiser}, **extra)
    with pytest.raises(Boom) as info:
        c.correlate(ev())
    assert info.value is boom
    with pytest.raises(Boom) as info:
        kubevents.simulate([record()], **{option: raiser}, **extra)
    assert info.value is boom


# --- simulate -----------------------------------------------------------------------------------------

def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_simulate_file_with_a_bad_line_names_the_file_and_the_line(tmp_path):
    good = json.dumps(record())
    path = write(tmp_path / "t.jsonl", [good, good, "{not json", good])
    for replay in (kubevents.simulate, lambda p: kubevents.sweep(p, {"burst": [1]}, progress=False)):
        with pytest.raises(ValueError) as e:
            replay(path)
        assert str(e.value) == f"{path}: line 3: key must be a string at column 2"


def test_simulate_file_line_numbers_count_blank_lines(tmp_path):
    good = json.dumps(record())
    path = write(tmp_path / "t.jsonl", [good, "", json.dumps({"t_ns": 1})])
    with pytest.raises(ValueError, match=r"line 3.*involved"):
        kubevents.simulate(path)


def test_simulate_file_wrong_type_is_a_type_error_with_the_line(tmp_path):
    path = write(tmp_path / "t.jsonl", [json.dumps(record()), json.dumps(record(t_ns=1.5))])
    with pytest.raises(TypeError, match="line 2"):
        kubevents.simulate(path)


def test_simulate_file_unknown_key_names_it(tmp_path):
    path = write(tmp_path / "t.jsonl", [json.dumps(record(reson="typo"))])
    with pytest.raises(ValueError, match=r"line 1.*reson"):
        kubevents.simulate(path)


def test_simulate_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        kubevents.simulate(tmp_path / "nope.jsonl")


def test_simulate_list_with_a_bad_record_names_the_item():
    records = [record(0), record(1), {"t_ns": T0}]
    with pytest.raises(ValueError, match=r"trace item 2.*involved"):
        kubevents.simulate(records)


def test_simulate_list_non_dict_item_names_it():
    with pytest.raises(TypeError, match="trace item 1"):
        kubevents.simulate([record(), "not a record"])


def test_simulate_t_ns_float_is_a_type_error():
    with pytest.raises(TypeError, match="t_ns"):
        kubevents.simulate([record(t_ns=1.5e18)])


@pytest.mark.parametrize("where", ["top", "involved"])
def test_simulate_unknown_key_is_a_value_error(where):
    r = record()
    if where == "top":
        r["reson"] = "typo"
        key = "reson"
    else:
        r["involved"]["apiVersion"] = "v1"
        key = "apiVersion"
    with pytest.raises(ValueError, match=key):
        kubevents.simulate([r])


def test_simulate_non_iterable_trace_is_a_type_error():
    with pytest.raises(TypeError, match="trace"):
        kubevents.simulate(42)


def test_simulate_error_from_a_generator_propagates():
    boom = Boom("generator")

    def gen():
        yield record()
        raise boom

    with pytest.raises(Boom) as info:
        kubevents.simulate(gen())
    assert info.value is boom


# --- Unicode ------------------------------------------------------------------------------------------

U = "ünï-çødé ✓ 日本語のメッセージ 😀🚀 \u2028 <&> \"q\" \\ \t"


def unicode_event():
    return {
        "apiVersion": "v1" + U,
        "kind": "Event" + U,
        "metadata": {"name": "名前" + U, "namespace": "ns-" + U, "resourceVersion": "rv" + U,
                     "annotations": {"ключ-" + U: "значение " + U, "🔑": "😀"}},
        "involvedObject": {"kind": "Pöd", "namespace": "名前空間", "name": "pod-😀", "uid": "uid-✓",
                           "apiVersion": "v1-ß", "resourceVersion": "7-ü", "fieldPath": "spec.containers{日本}"},
        "reason": "Räson-理由",
        "message": "Message " + U,
        "source": {"component": "kübelet", "host": "nöde-1 主机"},
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "count": 1,
        "type": "Wärning",
        "eventTime": None,
        "action": "Äction 🎬",
        "related": {"kind": "Nöde", "name": "nöde-1"},
        "reportingComponent": "rc-✓",
        "reportingInstance": "ri-日本",
    }


def test_unicode_round_trips_through_correlate():
    c = kubevents.Correlator(clock=FakeClock(1_700_000_000))
    e = unicode_event()
    r = c.correlate(copy.deepcopy(e))
    assert r.event == e


def test_unicode_round_trips_through_update_state_and_the_patch():
    clock = FakeClock(1_700_000_000)
    c = kubevents.Correlator(clock=clock)
    e = unicode_event()
    c.update_state(copy.deepcopy(e))
    e2 = copy.deepcopy(e)
    e2["lastTimestamp"] = "2024-01-01T00:00:05Z"
    e2["metadata"] = {"name": "other"}
    r = c.correlate(e2)
    assert r.event["count"] == 2
    assert r.event["metadata"]["name"] == e["metadata"]["name"]
    assert r.event["metadata"]["resourceVersion"] == e["metadata"]["resourceVersion"]
    assert r.event["message"] == e["message"]
    assert json.loads(r.patch) == {"count": 2, "lastTimestamp": "2024-01-01T00:00:05Z", "message": e["message"]}
    # Non-ASCII stays UTF-8 in the patch (Go escapes only HTML characters, U+2028/9 and controls).
    assert "日本語のメッセージ 😀🚀".encode() in r.patch


def test_unicode_reaches_key_functions_unchanged():
    seen = []

    def key(e):
        seen.append(e)
        return ("agg", e["message"])

    c = kubevents.Correlator(clock=FakeClock(0), key_func=key)
    e = unicode_event()
    c.correlate(copy.deepcopy(e))
    assert seen[0] == e


def test_unicode_in_make_event_and_simulate():
    clock = FakeClock(1_700_000_000)
    ref = {"kind": "Pöd", "namespace": "名前空間", "name": "pod", "uid": "✓"}
    ev1 = kubevents.make_event(ref, "Normal", "理由", U, source={"component": "kübelet", "host": "主机"},
                               clock=clock, annotations={"ü": "😀"})
    assert ev1["message"] == U and ev1["reason"] == "理由"
    assert ev1["metadata"] == {"name": f"pod.{1_700_000_000 * NS:x}", "namespace": "名前空間", "annotations": {"ü": "😀"}}
    assert ev1["involvedObject"] == ref
    assert ev1["reportingInstance"] == "主机"
    r = record(message=U, reason="理由", annotations={"ü": "😀"})
    r2 = dict(r, t_ns=r["t_ns"] + NS)
    d = list(kubevents.simulate([r, r2]).decisions())
    assert d[0]["message"] == d[1]["message"] == U
    assert json.loads(d[1]["patch"])["message"] == U


# --- more wrong types (exact error classes) -------------------------------------------------------------

@pytest.mark.parametrize("count", [True, 1.0, "1"])
def test_count_must_be_an_int(corr, count):
    with pytest.raises(TypeError, match="count"):
        corr.correlate(ev(count=count))


@pytest.mark.parametrize("t_ns, exc", [(True, TypeError), ("1", TypeError), (2**63, ValueError)])
def test_simulate_t_ns_must_be_an_int64(t_ns, exc):
    with pytest.raises(exc, match="t_ns"):
        kubevents.simulate([record(t_ns=t_ns)])


def test_simulate_involved_must_be_a_dict():
    with pytest.raises(TypeError, match="involved"):
        kubevents.simulate([record(involved="pod")])


# --- huge cache sizes must not take the interpreter down ----------------------------------------------

_HUGE_CACHE = r'''
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import kubevents
for make in (lambda: kubevents.Correlator(lru_cache_size=2**40, clock=kubevents.FakeClock(0)),
             lambda: kubevents.simulate([], lru_cache_size=2**40)):
    try:
        obj = make()
    except (ValueError, MemoryError, OverflowError) as e:
        print("raised", type(e).__name__)
    else:
        if isinstance(obj, kubevents.Correlator):
            obj.correlate({"involvedObject": {"name": "p"}, "count": 1})
        print("ok")
'''


def test_huge_lru_cache_size_does_not_abort_the_process():
    # client-go's LRU caches do not preallocate: any size works, and memory grows with use. Whatever
    # kubevents does with a huge size (work lazily, or refuse with a Python exception), the interpreter
    # must survive.
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _HUGE_CACHE], capture_output=True, text=True, timeout=120)
    rc, tail = p.returncode, p.stderr.strip().splitlines()[:2]
    assert rc == 0, f"the interpreter died with exit status {rc}: {tail}"
    assert len(p.stdout.strip().splitlines()) == 2


@pytest.mark.parametrize(
    "record, message",
    [
        ({"t_ns": 1, "involved": {"kind": "Pod", "name": "p"}, "reason": 5}, "line 1: reason: expected a string, got 5"),
        ({"t_ns": 1, "involved": {"kind": 3}}, "line 1: involved.kind: expected a string, got 3"),
        ({"t_ns": 1, "involved": {"kind": "Pod", "name": "p"}, "message": None}, None),
        ({"t_ns": 1, "involved": {"kind": "Pod", "name": None}, "type": None}, None),
    ],
)
def test_a_trace_file_and_record_dicts_accept_the_same_records(tmp_path, record, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(record) + "\n")
    if message is None:
        assert kubevents.simulate(str(path)).totals == kubevents.simulate([record]).totals
        return
    with pytest.raises(TypeError) as from_file:
        kubevents.simulate(str(path))
    assert str(from_file.value) == f"{path}: {message}"
    with pytest.raises(TypeError) as from_dicts:
        kubevents.simulate([record])
    # The dict path names the same field, in its own words.
    field = message.split(": ")[1]
    assert f"record.{field}: expected str" in str(from_dicts.value)
