"""Event traces: sequences of records, one per occurrence of an event, for ``kubevents.simulate``.

A record is a dict in the JSON Lines format of the project's workload generator::

    {"t_ns": 1700000000001000000,            # when the event was recorded, ns since the Unix epoch (int)
     "source_component": "kubelet", "source_host": "node-3",
     "involved": {"kind": "Pod", "namespace": "default", "name": "pod-17", "uid": "uid-pod-17",
                  "api_version": "v1", "field_path": "spec.containers{app}"},
     "type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container app in pod pod-17"}

``t_ns`` and ``involved`` are required; the strings may be left out (empty). ``involved.resource_version``
and ``annotations`` (a dict of str) are optional. Unknown keys are an error, so a misspelt field is caught.
"""

from __future__ import annotations

import random
import uuid

__all__ = ["kubelet_storm"]

_T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
_S = 10**9
_NODE = "node-7"


def _record(t_ns, pod, reason, type_, message, *, container="", component="kubelet"):
    ns, name = pod
    return {
        "t_ns": t_ns,
        "source_component": component,
        "source_host": _NODE if component == "kubelet" else "",
        "involved": {
            "kind": "Pod",
            "namespace": ns,
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{ns}/{name}")),
            "api_version": "v1",
            "field_path": f"spec.containers{{{container}}}" if container else "",
        },
        "type": type_,
        "reason": reason,
        "message": message,
    }


def kubelet_storm(seed: int = 7, minutes: int = 60) -> list[dict]:
    """An hour of one node during an incident, as its kubelet (and the scheduler) record it.

    About seven thousand events: a rollout whose new pods crash-loop (restart back-off from 10 s to 5 min,
    BackOff on every sync), pods stuck on an image that does not exist (ErrImagePull, ImagePullBackOff),
    a search cluster whose readiness probe reports a changing shard count (messages that differ every time,
    which the correlator aggregates), and batch pods missing a dozen secrets (FailedMount per volume).
    Deterministic for a given seed; records are in time order.
    """
    rng = random.Random(seed)
    end = _T0 + minutes * 60 * _S
    out: list[dict] = []

    def at(seconds):
        return _T0 + int(seconds * _S)

    def jitter(base):
        return base * (0.9 + 0.2 * rng.random())

    def start_pod(t, pod, image, container):
        out.append(_record(at(t), pod, "Scheduled", "Normal", f"Successfully assigned {pod[0]}/{pod[1]} to {_NODE}",
                           component="default-scheduler"))
        out.append(_record(at(t + 1), pod, "Pulling", "Normal", f'Pulling image "{image}"', container=container))
        return t + 1

    # A rollout whose new version crash-loops: restarts back off 10 s, 20 s, ... 300 s; every sync while
    # waiting reports BackOff.
    for i in range(6):
        pod = ("shop", f"checkout-7d9f8c6b5-{i:02d}x{rng.randrange(100, 999)}")
        image = "registry.corp/shop/checkout:v4.2.0"
        t = start_pod(rng.uniform(0, 60), pod, image, "app")
        out.append(_record(at(t + 3), pod, "Pulled", "Normal",
                           f'Successfully pulled image "{image}" in 2.{rng.randrange(10, 99)}s', container="app"))
        delay, restarts = 10.0, 0
        t += 4
        while at(t) < end:
            out.append(_record(at(t), pod, "Created", "Normal", "Created container app", container="app"))
            out.append(_record(at(t + 0.2), pod, "Started", "Normal", "Started container app", container="app"))
            t += jitter(3)  # the process dies after a few seconds
            restarts += 1
            wake = t + delay
            while t < wake and at(t) < end:
                out.append(_record(at(t), pod, "BackOff", "Warning",
                                   f"Back-off restarting failed container app in pod {pod[1]}_{pod[0]}({pod[1][-6:]})",
                                   container="app"))
                t += jitter(10)
            t = wake
            if at(t) < end:
                out.append(_record(at(t), pod, "Pulled", "Normal",
                                   f'Container image "{image}" already present on machine', container="app"))
            delay = min(delay * 2, 300.0)

    # Pods pinned to an image tag that was never pushed.
    for i in range(4):
        pod = ("reports", f"reports-worker-{i}")
        image = "registry.corp/reports/worker:v2.3.1"
        t = start_pod(rng.uniform(0, 120), pod, image, "worker")
        delay = 10.0
        while at(t) < end:
            out.append(_record(at(t), pod, "Failed", "Warning",
                               f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and '
                               f'unpack image "{image}": not found', container="worker"))
            out.append(_record(at(t + 0.01), pod, "Failed", "Warning", "Error: ErrImagePull", container="worker"))
            wake = t + delay
            t += 1
            while t < wake and at(t) < end:
                out.append(_record(at(t), pod, "BackOff", "Normal", f'Back-off pulling image "{image}"',
                                   container="worker"))
                out.append(_record(at(t + 0.01), pod, "Failed", "Warning", "Error: ImagePullBackOff",
                                   container="worker"))
                t += jitter(15)
            t = wake
            out.append(_record(at(t), pod, "Pulling", "Normal", f'Pulling image "{image}"', container="worker"))
            delay = min(delay * 2, 300.0)

    # A search cluster degrading: the probe output (shard counts, latency) changes on every failure.
    for i in range(3):
        pod = ("search", f"search-data-{i}")
        t = rng.uniform(300, 600)
        unassigned = rng.randrange(20, 40)
        while at(t) < end:
            unassigned = max(0, unassigned + rng.choice((-2, -1, 0, 1, 2, 3)))
            message = (f'Readiness probe failed: {{"cluster":"search","status":"red",'
                       f'"unassigned_shards":{unassigned},"took_ms":{rng.randrange(900, 3000)}}}')
            out.append(_record(at(t), pod, "Unhealthy", "Warning", message, container="elasticsearch"))
            if rng.random() < 0.2:
                out.append(_record(at(t + 0.5), pod, "Unhealthy", "Warning",
                                   'Liveness probe failed: Get "http://10.4.7.%d:9200/_cluster/health": context '
                                   'deadline exceeded (Client.Timeout exceeded while awaiting headers)' % (20 + i),
                                   container="elasticsearch"))
            t += jitter(10)

    # Batch pods whose secrets were deleted: every mount retry reports each missing volume.
    for i in range(3):
        pod = ("batch", f"nightly-export-{i}")
        t = rng.uniform(0, 300)
        out.append(_record(at(t), pod, "Scheduled", "Normal", f"Successfully assigned batch/{pod[1]} to {_NODE}",
                           component="default-scheduler"))
        retry = 0.5
        while at(t) < end:
            for v in range(12):
                out.append(_record(at(t + v * 0.01), pod, "FailedMount", "Warning",
                                   f'MountVolume.SetUp failed for volume "creds-{v}" : secret "export-creds-{v}" '
                                   "not found"))
            t += retry
            retry = min(retry * 2, 122.0)

    out.sort(key=lambda r: r["t_ns"])
    return out
