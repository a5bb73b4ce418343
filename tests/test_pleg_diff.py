"""kubevents.pleg.diff: Go's transition table and collection order; pod input forms; replay properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pleg_fakes import C, E, FakeRuntime, pod

from kubevents import FakeClock
from kubevents.pleg import GenericPLEG, Pod, PodCache, PodList, diff

STATES = ["created", "running", "exited", "unknown"]

# old state -> new state -> event types (None = the container does not exist)
TABLE = {
    (None, "running"): ["ContainerStarted"],
    (None, "exited"): ["ContainerDied"],
    (None, "unknown"): ["ContainerChanged"],
    ("running", "exited"): ["ContainerDied"],
    ("running", "unknown"): ["ContainerChanged"],
    ("running", None): ["ContainerDied", "ContainerRemoved"],
    ("exited", "running"): ["ContainerStarted"],
    ("exited", "unknown"): ["ContainerChanged"],
    ("exited", None): ["ContainerRemoved"],
    ("unknown", "running"): ["ContainerStarted"],
    ("unknown", "exited"): ["ContainerDied"],
    ("unknown", None): ["ContainerDied", "ContainerRemoved"],
}


@pytest.mark.parametrize("old", [None, "running", "exited", "unknown", "created"])
@pytest.mark.parametrize("new", [None, "running", "exited", "unknown", "created"])
def test_transition_table(old, new):
    o = pod("p", [C("c", old)]) if old else pod("p")
    n = pod("p", [C("c", new)]) if new else pod("p")
    norm = {"created": "unknown"}
    expected = TABLE.get((norm.get(old, old), norm.get(new, new)), [])
    assert [e.type for e in diff(o, n)] == expected
    assert all(e.id == "p" and e.data == "c" for e in diff(o, n))


def test_collection_order_and_dedup():
    old = pod("p", [C("a", "running"), C("dup", "running")], [C("s1", "running")])
    new = pod("p", [C("b", "running"), C("a", "exited")], [C("s2", "running"), C("dup", "exited")])
    assert diff(old, new) == [
        E("p", "ContainerDied", "a"),
        # "dup" is a container in old, a sandbox in new: one id, compared once.
        E("p", "ContainerDied", "dup"),
        E("p", "ContainerDied", "s1"),
        E("p", "ContainerRemoved", "s1"),
        E("p", "ContainerStarted", "b"),
        E("p", "ContainerStarted", "s2"),
    ]


def test_pod_id_from_old_pod_and_none_pods():
    assert diff(pod("old", [C("c", "running")]), pod("new", [C("c", "exited")])) == [E("old", "ContainerDied", "c")]
    assert diff(None, pod("new", [C("c", "running")])) == [E("new", "ContainerStarted", "c")]
    assert diff(None, None) == []


def test_input_forms_agree():
    d = pod("p", [C("c", "running")], [C("s", "exited")], name="n", namespace="ns")
    t = ("p", "n", "ns", [("c", "running")], [("s", "exited")])
    obj = Pod("p", "n", "ns", [("c", "running")], [{"id": "s", "state": "exited"}])
    assert diff(None, d) == diff(None, t) == diff(None, obj)
    assert obj.to_dict() == d
    assert PodList([d, t, obj]).to_list() == [d, d, d]


def test_unknown_state_raises_value_error():
    with pytest.raises(ValueError, match=r"new_pod.containers\[0\].state: unrecognized container state \"paused\""):
        diff(None, pod("p", [C("c", "paused")]))
    with pytest.raises(ValueError, match="unrecognized container state"):
        Pod("p", containers=[("c", "zombie")])


@pytest.mark.parametrize(
    "bad,exc,msg",
    [
        (42, TypeError, "expected a pod dict or tuple"),
        ({"containers": []}, ValueError, 'missing "id"'),
        ({"id": 1}, TypeError, r"new_pod.id: expected a str"),
        (("p", "n"), TypeError, "expected \\(id, name, namespace, containers, sandboxes\\)"),
        ({"id": "p", "containers": "abc"}, TypeError, "containers: expected a list"),
        ({"id": "p", "containers": [("c",)]}, TypeError, r"expected \(id, state\)"),
        ({"id": "p", "containers": [{"id": "c"}]}, ValueError, 'missing "state"'),
    ],
)
def test_bad_pods(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        diff(None, bad)


def expected_states(pods) -> dict[tuple[str, str], str]:
    """Final container states of a listing, as the diff sees them (first occurrence of an id wins)."""
    out: dict[tuple[str, str], str] = {}
    for p in pods:
        for c in [*p["containers"], *p["sandboxes"]]:
            out.setdefault((p["id"], c["id"]), "unknown" if c["state"] == "created" else c["state"])
    return out


def replay(events, states, with_changed=True) -> None:
    for e in events:
        k = (e.id, e.data)
        if e.type == "ContainerStarted":
            states[k] = "running"
        elif e.type == "ContainerDied":
            states[k] = "exited"
        elif e.type == "ContainerChanged" and with_changed:
            states[k] = "unknown"
        elif e.type == "ContainerRemoved":
            states.pop(k, None)


containers = st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3", "c4"]), st.sampled_from(STATES)), max_size=4)
listing = st.lists(
    st.tuples(st.sampled_from(["pa", "pb", "pc"]), containers, containers), max_size=3, unique_by=lambda t: t[0]
).map(lambda ps: [pod(pid, [C(*c) for c in cs], [C(*s) for s in ss]) for pid, cs, ss in ps])


@given(st.lists(listing, min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_replaying_diffs_reproduces_the_final_states(listings):
    states: dict[tuple[str, str], str] = {}
    prev: dict[str, dict] = {}
    for pods in listings:
        cur = {p["id"]: p for p in pods}
        for pid in sorted(set(prev) | set(cur)):
            replay(diff(prev.get(pid), cur.get(pid)), states)
        prev = cur
    assert states == expected_states(listings[-1])


running_or_exited = st.lists(
    st.tuples(st.sampled_from(["c1", "c2", "c3"]), st.sampled_from(["running", "exited"])),
    max_size=3,
    unique_by=lambda t: t[0],
)
plain_listing = st.lists(
    st.tuples(st.sampled_from(["pa", "pb", "pc"]), running_or_exited), max_size=3, unique_by=lambda t: t[0]
).map(lambda ps: [pod(pid, [C(*c) for c in cs]) for pid, cs in ps])


@given(st.lists(plain_listing, min_size=1, max_size=6))
@settings(max_examples=100, deadline=None)
def test_replaying_pleg_events_reproduces_the_final_states(listings):
    """Through GenericPLEG (ContainerChanged is never sent, so states stay running/exited)."""
    rt = FakeRuntime()
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), channel_capacity=1000)
    states: dict[tuple[str, str], str] = {}
    for pods in listings:
        rt.pods = pods
        pleg.relist()
        events = pleg.watch().drain()
        assert [e.id for e in events] == sorted(e.id for e in events), "pods in UID order"
        replay(events, states, with_changed=False)
    assert states == expected_states(listings[-1])
