"""Ports of the kubelet's cache_test.go, plus the blocking, timeout and awaitable forms of GetNewerThan."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pleg_fakes import wait_for

from kubevents.pleg import PodCache

T = 1_700_000_000


def status(pid: str, n: int) -> dict:
    if n == 0:
        return {"id": pid}
    return {
        "id": pid,
        "name": f"cache-foo-{pid}",
        "namespace": "ns",
        "container_statuses": [{"name": str(i)} for i in range(n)],
    }


def ready_now(cache: PodCache, uid: str, t) -> bool:
    """getIfNewerThan: the immediate answer of get_newer_than."""
    try:
        cache.get_newer_than(uid, t, timeout=0)
    except TimeoutError:
        return False
    return True


def test_cache_not_initialized():
    assert not ready_now(PodCache(), "1234", 0)


@pytest.mark.parametrize(
    "cache_time,modified,expected",
    [(T + 1, T, True), (T + 1, T - 10, True), (T - 1, T + 3, True), (T - 1, T - 1, False)],
)
def test_get_if_newer_than_when_pod_exists(cache_time, modified, expected):
    cache = PodCache()
    cache.update_time(cache_time)
    cache.set("pod", status("pod", 2), None, modified)
    assert ready_now(cache, "pod", T) == expected


def test_get_pod_newer_than_when_pod_does_not_exist():
    cache = PodCache()
    cache.update_time(T)
    assert cache.get_newer_than("1234", T - 1, timeout=0) == ({"id": "1234"}, None)
    assert not ready_now(cache, "1234", T + 1)


@pytest.mark.parametrize("n,err", [(3, None), (2, RuntimeError("unable to get status")), (0, None)])
def test_cache_set_and_get(n, err):
    cache = PodCache()
    s = status("42", n)
    assert cache.set("42", s, err) is True
    got, got_err = cache.get("42")
    assert got is s and got_err is err


def test_cache_get_pod_does_not_exist():
    assert PodCache().get("unknown") == ({"id": "unknown"}, None)


def test_delete():
    cache = PodCache()
    s = status("42", 3)
    cache.set("42", s, None, 0)
    assert cache.get("42") == (s, None)
    cache.delete("42")
    assert cache.get("42") == ({"id": "42"}, None)
    assert len(cache) == 0


def blocked_waiter(cache: PodCache, uid: str, t) -> tuple[threading.Thread, list]:
    out: list = []
    th = threading.Thread(target=lambda: out.append(cache.get_newer_than(uid, t)))
    before = cache.waiters
    th.start()
    wait_for(lambda: cache.waiters == before + 1, "the waiter to subscribe")
    return th, out


def test_register_notification():
    cache = PodCache()
    cache.update_time(T)
    th, out = blocked_waiter(cache, "pod", T + 1)
    assert out == []
    s = status("pod", 1)
    # An equal timestamp satisfies a notification (but not an immediate answer).
    cache.set("pod", s, None, T + 1)
    th.join(10)
    assert out == [(s, None)]

    th2, out2 = blocked_waiter(cache, "pod2", T + 1)
    assert out2 == []
    cache.update_time(T + 2)
    th2.join(10)
    assert out2 == [({"id": "pod2"}, None)]
    assert cache.waiters == 0


def test_delete_does_not_notify_and_the_payload_is_read_at_notify_time():
    cache = PodCache()
    cache.set("pod", status("pod", 1), None, T)
    th, out = blocked_waiter(cache, "pod", T + 5)
    cache.delete("pod")
    assert out == [] and cache.waiters == 1
    cache.update_time(T + 5)
    th.join(10)
    assert out == [({"id": "pod"}, None)]


def test_observed_time_is_a_per_pod_update_time():
    """Era C's SetObservedTime (semantics chosen here, see kubevents.pleg): that pod's waiters are notified
    at an equal time and answered at once for earlier ones, with the status unchanged; other pods wait."""
    cache = PodCache()
    s = status("pod", 1)
    cache.set("pod", s, None, T)
    th, out = blocked_waiter(cache, "pod", T + 5)
    th_other, out_other = blocked_waiter(cache, "other", T + 5)
    cache.set_observed_time("pod", T + 5)
    th.join(10)
    assert out == [(s, None)] and cache.get("pod") == (s, None)
    assert out_other == [] and cache.waiters == 1
    assert not ready_now(cache, "pod", T + 5) and ready_now(cache, "pod", T + 4)
    cache.set_observed_time("pod", T + 1)
    assert cache.observed_time("pod").timestamp() == T + 5, "it only moves forward"
    cache.set_observed_time("other", T + 5)
    th_other.join(10)
    assert out_other == [({"id": "other"}, None)], "a pod without an entry gets the default status"
    cache.delete("pod")
    assert cache.observed_time("pod") is None and not ready_now(cache, "pod", T + 4)


def test_timeout_raises_and_unsubscribes():
    cache = PodCache()
    with pytest.raises(TimeoutError, match="pod"):
        cache.get_newer_than("pod", T, timeout=0.01)
    assert cache.waiters == 0


def test_evented_rule():
    cache = PodCache(evented=True)
    assert cache.set("p", {"id": "p", "v": 1}, None, T + 10)
    assert not cache.set("p", {"id": "p", "v": 2}, None, T + 9), "older than the entry"
    assert cache.set("p", {"id": "p", "v": 3}, None, T + 10), "an equal timestamp is accepted"
    assert cache.get("p")[0]["v"] == 3
    plain = PodCache()
    plain.set("p", {"id": "p"}, None, T + 10)
    assert plain.set("p", {"id": "p"}, None, T + 9), "without the rule, Set always overwrites"


def test_global_timestamp_is_not_monotonic():
    cache = PodCache()
    cache.update_time(T + 10)
    cache.update_time(T)
    assert cache.timestamp.timestamp() == T


def test_awaitable_get_newer_than():
    async def main():
        cache = PodCache()
        task = asyncio.ensure_future(cache.get_newer_than_async("pod", T))
        await asyncio.sleep(0)
        assert not task.done()
        assert cache.waiters == 1
        s = {"id": "pod"}
        # From another thread, as a PLEG would.
        await asyncio.to_thread(cache.set, "pod", s, None, T + 1)
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(main()) == ({"id": "pod"}, None)


def test_awaitable_is_immediate_when_fresh():
    async def main():
        cache = PodCache()
        cache.update_time(T + 1)
        return await cache.get_newer_than_async("pod", T)

    assert asyncio.run(main()) == ({"id": "pod"}, None)


def test_bad_arguments():
    cache = PodCache()
    with pytest.raises(TypeError, match="status: expected a status dict"):
        cache.set("p", ["not", "a", "dict"])
    with pytest.raises(TypeError, match=r"status.ips\[0\]: expected a str"):
        cache.set("p", {"ips": [1]})
    with pytest.raises(ValueError, match="SANDBOX_READY or SANDBOX_NOTREADY"):
        cache.set("p", {"sandbox_statuses": [{"id": "s", "state": "READY"}]})
    with pytest.raises(TypeError, match="timestamp"):
        cache.update_time("yesterday")
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        cache.get_newer_than("p", T, timeout=-1)
