"""Ports of the kubelet's generic_test.go (v1.32–v1.35, with watch conditions)."""

from __future__ import annotations

import pytest
from pleg_fakes import C, E, FakeRuntime, by_id_data, pod

from kubevents import FakeClock
from kubevents.pleg import GenericPLEG, PodCache, running_container_watch_condition

R, X, U = "running", "exited", "unknown"
LARGE_CHANNEL = 100


def new_pleg(runtime, capacity=LARGE_CHANNEL, clock=None, **kw) -> GenericPLEG:
    return GenericPLEG(
        runtime, cache=PodCache(), clock=clock or FakeClock(0), relist_period=3600, channel_capacity=capacity, **kw
    )


def relisting_lists(field: str):
    def p(pid, cs):
        return pod(pid, **{field: cs})

    first = [p("1234", [C("c1", X), C("c2", R), C("c3", U)]), p("4567", [C("c1", X)])]
    third = [p("1234", [C("c2", X), C("c3", R)]), p("4567", [C("c4", R)])]
    return first, third


FIRST_EVENTS = [E("1234", "ContainerDied", "c1"), E("1234", "ContainerStarted", "c2"), E("4567", "ContainerDied", "c1")]
THIRD_EVENTS = [
    E("1234", "ContainerRemoved", "c1"),
    E("1234", "ContainerDied", "c2"),
    E("1234", "ContainerStarted", "c3"),
    E("4567", "ContainerRemoved", "c1"),
    E("4567", "ContainerStarted", "c4"),
]


@pytest.mark.parametrize("field", ["containers", "sandboxes"])
def test_relisting(field):
    """TestRelisting and TestRelistingWithSandboxes: sandboxes are diffed like containers."""
    first, third = relisting_lists(field)
    rt = FakeRuntime(first)
    pleg = new_pleg(rt)
    ch = pleg.watch()
    pleg.relist()
    # The unknown c3 yields ContainerChanged, which is never sent. Events come sorted by pod UID already.
    assert ch.drain() == FIRST_EVENTS
    pleg.relist()
    assert ch.drain() == [], "no container has changed, event length should be 0"
    rt.pods = third
    pleg.relist()
    assert ch.drain() == THIRD_EVENTS


def test_event_channel_full():
    first, third = relisting_lists("containers")
    rt = FakeRuntime(first)
    pleg = new_pleg(rt, capacity=4)
    ch = pleg.watch()
    pleg.relist()
    assert by_id_data(ch.drain()) == FIRST_EVENTS
    rt.pods = third
    pleg.relist()
    got = ch.drain()
    assert len(got) == 4, "channel length should be 4"
    assert set(got) <= set(THIRD_EVENTS)
    # Sorted pod order makes the dropped one deterministic: the last.
    assert got == THIRD_EVENTS[:4]
    assert pleg.stats()["events_dropped"] == 1
    assert ch.dropped == 1


@pytest.mark.parametrize("n", [1, 3])
def test_detecting_missing_containers(n):
    rt = FakeRuntime([pod("1234", [C("c1", R), C("c2", R), C("c3", X)])])
    pleg = new_pleg(rt)
    for _ in range(n):
        pleg.relist()
        pleg.watch().drain()
    rt.pods = [pod("1234", [C("c1", R)])]
    pleg.relist()
    assert by_id_data(pleg.watch().drain()) == [
        E("1234", "ContainerDied", "c2"),
        E("1234", "ContainerRemoved", "c2"),
        E("1234", "ContainerRemoved", "c3"),
    ]


@pytest.mark.parametrize("n", [1, 3])
def test_detecting_missing_pods(n):
    rt = FakeRuntime([pod("1234", [C("c2", R)])])
    pleg = new_pleg(rt)
    for _ in range(n):
        pleg.relist()
        pleg.watch().drain()
    rt.pods = []
    pleg.relist()
    assert pleg.watch().drain() == [E("1234", "ContainerDied", "c2"), E("1234", "ContainerRemoved", "c2")]


def pods_statuses_events(n):
    pods = [pod(f"test-pod-{i}", [C(f"c{i}", R)]) for i in range(n)]
    statuses = [{"id": f"test-pod-{i}", "container_statuses": [{"id": f"c{i}", "state": R}]} for i in range(n)]
    events = [E(f"test-pod-{i}", "ContainerStarted", f"c{i}") for i in range(n)]
    return pods, statuses, events


def test_relist_with_cache():
    pods, statuses, events = pods_statuses_events(2)
    rt = FakeRuntime(pods)
    status_err = RuntimeError("unable to get status")
    rt.statuses = {"test-pod-0": statuses[0], "test-pod-1": ({}, status_err)}
    pleg = new_pleg(rt)
    pleg.relist()
    assert rt.calls == ["test-pod-0", "test-pod-1"]
    assert pleg.cache.get("test-pod-0") == (statuses[0], None)
    # The failed inspection is stored with its error.
    assert pleg.cache.get("test-pod-1") == ({}, status_err)
    assert pleg.watch().drain() == [events[0]]

    rt.calls.clear()
    rt.statuses["test-pod-1"] = statuses[1]
    pleg.relist()
    assert rt.calls == ["test-pod-1"]
    for i in range(2):
        assert pleg.cache.get(f"test-pod-{i}") == (statuses[i], None)
    assert pleg.watch().drain() == [events[1]]


def test_inspection_that_raises_stores_the_exception():
    rt = FakeRuntime([pod("p", [C("c", R)])])
    err = OSError("runtime unavailable")
    rt.statuses["p"] = err
    pleg = new_pleg(rt)
    pleg.relist()
    assert pleg.cache.get("p") == (None, err)
    assert pleg.pods_to_reinspect() == ["p"]
    assert pleg.stats()["inspection_errors"] == 1


def test_remove_cache_entry():
    pods, statuses, _ = pods_statuses_events(1)
    rt = FakeRuntime(pods)
    rt.statuses["test-pod-0"] = statuses[0]
    pleg = new_pleg(rt)
    pleg.relist()
    assert pleg.cache.get("test-pod-0") == (statuses[0], None)
    rt.pods = []
    pleg.relist()
    assert pleg.cache.get("test-pod-0") == ({"id": "test-pod-0"}, None)


def test_healthy():
    clock = FakeClock(0)
    pleg = new_pleg(FakeRuntime([]), clock=clock)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    clock.step(600)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    pleg.relist()
    clock.step(60)
    assert pleg.healthy() == (True, None)
    clock.step(180)
    assert pleg.healthy() == (False, "pleg was last seen active 4m0s ago; threshold is 3m0s")


def test_health_threshold_is_strict():
    clock = FakeClock(1_000)
    pleg = new_pleg(FakeRuntime([]), clock=clock)
    pleg.relist()
    clock.step(180)
    assert pleg.healthy() == (True, None)
    clock.step(0.5)
    assert pleg.healthy() == (False, "pleg was last seen active 3m0.5s ago; threshold is 3m0s")


def test_failed_listing_changes_nothing():
    clock = FakeClock(1_000)
    rt = FakeRuntime([pod("p", [C("c", R)])])
    pleg = new_pleg(rt, clock=clock)
    rt.list_error = ConnectionError("runtime down")
    with pytest.raises(ConnectionError, match="runtime down"):
        pleg.relist()
    assert pleg.relist_time is None
    assert pleg.cache.timestamp is None
    assert pleg.watch().drain() == []
    assert pleg.stats()["relist_failures"] == 1
    rt.list_error = None
    clock.step(5)
    pleg.relist()
    assert pleg.relist_time.timestamp() == 1_005
    assert pleg.cache.timestamp.timestamp() == 1_005
    assert pleg.watch().drain() == [E("p", "ContainerStarted", "c")]


def test_relist_with_reinspection():
    infra = C("infra", R)
    rt = FakeRuntime([pod("test-pod", [infra])])
    good = {"id": "test-pod", "container_statuses": [{"id": "infra", "state": R}]}
    rt.statuses["test-pod"] = good
    pleg = new_pleg(rt)
    pleg.relist()
    assert pleg.cache.get("test-pod") == (good, None)
    assert pleg.watch().drain() == [E("test-pod", "ContainerStarted", "infra")]

    rt.pods = [pod("test-pod", [infra, C("transient", U)])]
    bad = {"id": "test-pod", "container_statuses": []}
    err = RuntimeError("inspection error")
    rt.statuses["test-pod"] = (bad, err)
    pleg.relist()
    assert pleg.cache.get("test-pod") == (bad, err)
    assert pleg.watch().drain() == []
    assert pleg.pods_to_reinspect() == ["test-pod"]

    rt.pods = [pod("test-pod", [infra])]
    rt.statuses["test-pod"] = good
    rt.calls.clear()
    pleg.relist()
    assert rt.calls == ["test-pod"], "the forced reinspection"
    assert pleg.cache.get("test-pod") == (good, None)
    assert pleg.watch().drain() == []
    assert pleg.pods_to_reinspect() == []
    assert pleg.stats()["reinspections"] == 1


@pytest.mark.parametrize(
    "pid,ips", [("test-pod-0", ["192.168.1.5"]), ("test-pod-1", ["192.168.1.5/24", "2000::"])], ids=["test-0", "tets-1"]
)
def test_relist_ip_change(pid, ips):
    rt = FakeRuntime([pod(pid, [C("c0", R)])])
    status = {"id": pid, "ips": ips, "container_statuses": [{"id": "c0", "state": R}]}
    rt.statuses[pid] = status
    pleg = new_pleg(rt)
    pleg.relist()
    assert pleg.cache.get(pid) == (status, None)
    assert pleg.watch().drain() == [E(pid, "ContainerStarted", "c0")]

    rt.pods = [pod(pid, [C("c0", X)])]
    dead = {"id": pid, "container_statuses": [{"id": "c0", "state": X}]}
    rt.statuses[pid] = dead
    pleg.relist()
    got, err = pleg.cache.get(pid)
    assert err is None
    assert got == {**dead, "ips": ips}
    assert "ips" not in dead, "the runtime's dict is left alone"
    assert pleg.watch().drain() == [E(pid, "ContainerDied", "c0")]


def test_ready_sandbox_takes_the_new_empty_ips():
    pid = "p"
    rt = FakeRuntime([pod(pid, [C("c0", R)])])
    rt.statuses[pid] = {"id": pid, "ips": ["10.0.0.1"]}
    pleg = new_pleg(rt)
    pleg.relist()
    rt.pods = [pod(pid, [C("c0", X)])]
    rt.statuses[pid] = {"id": pid, "ips": [], "sandbox_statuses": [{"id": "s", "state": "SANDBOX_READY"}]}
    pleg.relist()
    assert pleg.cache.get(pid)[0]["ips"] == []


def test_running_pod_and_container_count():
    rt = FakeRuntime(
        [
            pod("1234", [C("c1", R), C("c2", U), C("c3", U)], [C("s1", R), C("s2", R), C("s3", U)]),
            pod("4567", [C("c1", X)], [C("s1", R), C("s2", X)]),
        ]
    )
    pleg = new_pleg(rt)
    pleg.relist()
    s = pleg.stats()
    assert s["running_pods"] == 2
    assert s["running_containers"] == {"created": 0, "running": 1, "exited": 1, "unknown": 2}


# --- TestWatchConditions ---

WC_PODS = [
    pod("running", [C("c", R)], [C("s", R)], name="running-pod"),
    pod("running-2", [C("c-exited", X), C("c-running", R)], [C("s", R)], name="running-pod-2"),
    pod("terminating", [], [C("s", X)], name="terminating-pod"),
    pod("reinspect", [], [C("s", R)], name="reinspect-pod"),
]
WC_INITIAL = [*WC_PODS, pod("terminated", [], [C("s", X)], name="terminated-pod")]


def status_of(p):
    return {
        "id": p["id"],
        "name": p["name"],
        "namespace": p["namespace"],
        "container_statuses": [{"id": c["id"], "name": c["id"], "state": c["state"]} for c in p["containers"]],
    }


def always_complete(_status):
    return True


def never_complete(_status):
    return False


def container_cond(name, complete):
    def check(s):
        assert s["name"] == name
        return complete

    return running_container_watch_condition(name, check)


WATCH_CASES = [
    # name, pod uid, conditions, increment initial version, evaluated, removed, remaining
    ("no watch conditions", "running", {}, False, False, False, {}),
    (
        "running pod with conditions",
        "running",
        {"completing": always_complete, "watching": never_complete, "updating": "updating"},
        False,
        True,
        False,
        {"watching": 0, "updating": 1},
    ),
    (
        "conditions with incremented versions",
        "running",
        {"completing": always_complete, "watching": never_complete, "updating": "updating"},
        True,
        True,
        False,
        {"watching": 1, "updating": 2},
    ),
    ("non-existent pod", "non-existent", {"watching": never_complete}, False, False, True, None),
    ("terminated pod", "terminated", {"watching": never_complete}, False, False, True, None),
    ("reinspecting pod", "reinspect", {"watching": never_complete}, False, True, False, {"watching": 0}),
    (
        "single container conditions",
        "running",
        {"completing": container_cond("c", True), "watching": container_cond("c", False)},
        False,
        True,
        False,
        {"watching": 0},
    ),
    (
        "multi-container conditions",
        "running-2",
        {
            "completing:exited": container_cond("c-exited", True),
            "watching:exited": container_cond("c-exited", False),
            "completing:running": container_cond("c-running", True),
            "watching:running": container_cond("c-running", False),
            "completing:dne": container_cond("c-dne", True),
            "watching:dne": container_cond("c-dne", False),
        },
        False,
        True,
        False,
        {"watching:running": 0},
    ),
]


@pytest.mark.parametrize(
    "name,uid,conditions,incr,expect_evaluated,expect_removed,expect_remaining",
    WATCH_CASES,
    ids=[c[0] for c in WATCH_CASES],
)
def test_watch_conditions(name, uid, conditions, incr, expect_evaluated, expect_removed, expect_remaining):
    rt = FakeRuntime(WC_INITIAL)
    rt.statuses = {p["id"]: status_of for p in WC_INITIAL}
    pleg = new_pleg(rt)
    pleg.relist()
    pleg.watch().drain()
    pleg.request_reinspect("reinspect")

    evaluated = []

    def updating_cond(_status):
        pleg.set_pod_watch_condition("running", "updating", wrap("updating", updating_cond))
        return True

    def wrap(key, fn):
        def cond(status):
            evaluated.append(key)
            return fn(status)

        return cond

    for key, fn in conditions.items():
        fn = updating_cond if fn == "updating" else fn
        pleg.set_pod_watch_condition(uid, key, wrap(key, fn))
        if incr:
            pleg.set_pod_watch_condition(uid, key, wrap(key, fn))

    rt.pods = WC_PODS
    pleg.relist()
    events = pleg.watch().drain()

    if expect_evaluated:
        assert len(evaluated) == len(conditions)
    else:
        assert evaluated == []
    if expect_removed:
        assert pleg.watch_conditions(uid) is None
    else:
        assert (pleg.watch_conditions(uid) or {}) == expect_remaining
    met = [e for e in events if e.type == "ConditionMet"]
    # One ConditionMet when at least one condition completed.
    completed = expect_evaluated and len(expect_remaining or {}) < len(conditions)
    assert met == ([E(uid, "ConditionMet")] if completed else [])


def test_completed_condition_set_again_meanwhile_is_kept():
    """Go's "completed watch condition with older version": the condition is replaced while it is being
    evaluated, so its completion does not remove the newer version."""
    rt = FakeRuntime([pod("running", [C("c", R)], [C("s", R)])])
    pleg = new_pleg(rt)
    pleg.relist()
    pleg.watch().drain()

    def resetting(_status):
        pleg.set_pod_watch_condition("running", "resetting", never_complete)
        return True

    pleg.set_pod_watch_condition("running", "resetting", resetting)
    pleg.set_pod_watch_condition("running", "resetting", resetting)
    pleg.relist()
    assert pleg.watch_conditions("running") == {"resetting": 2}
    assert pleg.watch().drain() == [E("running", "ConditionMet")]


def test_condition_met_comes_after_the_container_events():
    rt = FakeRuntime([pod("p", [C("c", R)])])
    pleg = new_pleg(rt)
    pleg.set_pod_watch_condition("p", "k", always_complete)
    pleg.relist()
    assert pleg.watch().drain() == [E("p", "ContainerStarted", "c"), E("p", "ConditionMet")]
    assert pleg.watch_conditions("p") == {}


def test_failing_condition_is_raised_after_the_relist():
    rt = FakeRuntime([pod("a", [C("c", R)]), pod("b", [C("c", R)])])
    pleg = new_pleg(rt)

    def broken(_status):
        raise KeyError("nope")

    pleg.set_pod_watch_condition("a", "k", broken)
    with pytest.raises(KeyError, match="nope"):
        pleg.relist()
    # Both pods were still handled; the failing condition counts as not met.
    assert pleg.watch().drain() == [E("a", "ContainerStarted", "c"), E("b", "ContainerStarted", "c")]
    assert pleg.watch_conditions("a") == {"k": 0}


# --- Era C: TestReinspect (pod_sync_on_reinspect=True) ---

REINSPECT_CASES = [
    # name, request, previously listed, error, pod deleted, expect call, pending after, pod sync
    ("not previously listed, success", True, False, None, False, True, False, True),
    ("not previously listed, failure", True, False, "fail", False, True, True, False),
    ("already listed, success", True, True, None, False, True, False, True),
    ("already listed, failure", True, True, "fail", False, True, True, False),
    ("don't request", False, True, None, False, False, False, False),
    ("pod deleted", True, True, None, True, False, False, True),
]


@pytest.mark.parametrize(
    "name,requested,listed,error,deleted,expect_call,pending,pod_sync",
    REINSPECT_CASES,
    ids=[c[0] for c in REINSPECT_CASES],
)
def test_reinspect_era_c(name, requested, listed, error, deleted, expect_call, pending, pod_sync):
    the_pod = pod("test-pod", name="name", namespace="ns")
    rt = FakeRuntime([the_pod] if listed else [])
    pleg = new_pleg(rt, pod_sync_on_reinspect=True)
    pleg.relist()
    rt.calls.clear()
    if requested:
        pleg.request_reinspect("test-pod")
    rt.pods = [] if deleted else [the_pod]
    status = {"id": "test-pod", "timestamp": 1}
    fail = RuntimeError("fail")
    rt.statuses["test-pod"] = fail if error else status
    pleg.relist()
    assert rt.calls == (["test-pod"] if expect_call else [])
    assert pleg.pods_to_reinspect() == (["test-pod"] if pending else [])
    assert pleg.watch().drain() == ([E("test-pod", "PodSync")] if pod_sync else [])
    if deleted or not expect_call:
        assert pleg.cache.get("test-pod") == ({"id": "test-pod"}, None)
    elif error:
        assert pleg.cache.get("test-pod") == (None, fail)
    else:
        assert pleg.cache.get("test-pod") == (status, None)


def test_era_c_request_waits_for_its_pod_and_era_b_drops_it():
    rt = FakeRuntime([])
    era_c = new_pleg(rt, pod_sync_on_reinspect=True)
    era_b = new_pleg(rt)
    for pleg in (era_c, era_b):
        pleg.request_reinspect("later")
        pleg.relist()
    assert era_c.pods_to_reinspect() == ["later"]
    assert era_b.pods_to_reinspect() == []
    rt.pods = [pod("later")]
    era_c.relist()
    assert era_c.watch().drain() == [E("later", "PodSync")]
    assert era_c.pods_to_reinspect() == []


def test_era_b_reinspection_finding_nothing_sends_nothing():
    rt = FakeRuntime([pod("p", [C("c", R)])])
    pleg = new_pleg(rt)
    pleg.relist()
    pleg.watch().drain()
    pleg.request_reinspect("p")
    pleg.relist()
    assert rt.calls == ["p", "p"]
    assert pleg.watch().drain() == []
