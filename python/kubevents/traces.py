"""Event traces: sequences of records, one per occurrence of an event, for ``kubevents.simulate``.

A record is a dict in the JSON Lines format of the project's workload generator::

    {"t_ns": 1700000000001000000,            # when the event was recorded, ns since the Unix epoch (int)
     "source_component": "kubelet", "source_host": "node-3",
     "involved": {"kind": "Pod", "namespace": "default", "name": "pod-17", "uid": "uid-pod-17",
                  "api_version": "v1", "field_path": "spec.containers{app}"},
     "type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container app in pod pod-17"}

``t_ns`` and ``involved`` are required; the strings may be left out (empty). ``involved.resource_version``
and ``annotations`` (a dict of str) are optional. Unknown keys are an error, so a misspelt field is caught.

A trace can also be a table (pyarrow, polars, anything with ``__arrow_c_stream__``) with one row per record
and the involved object's fields flattened into columns (``involved.namespace``); ``to_arrow``,
``to_parquet`` and ``read_parquet`` make and read them (``scan_parquet`` streams a Parquet file into a
replay), and ``TABLE_COLUMNS`` lists the columns (their types are in the docs of ``kubevents._tables``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import heapq
import json
import os
import random
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypedDict

from kubevents import _partitions
from kubevents._tables import COLUMNS as TABLE_COLUMNS
from kubevents._tables import _pyarrow, read_parquet, scan_parquet, to_arrow, to_parquet, to_records

if TYPE_CHECKING:
    import pyarrow

__all__ = ["TABLE_COLUMNS", "cluster_storm", "kubelet_storm", "read_parquet", "scan_parquet", "to_arrow", "to_parquet",
           "to_records", "write_cluster_storm"]

_T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
_S = 10**9
_NODE = "node-7"


@functools.lru_cache(maxsize=4096)
def _uid(path: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, path))


def _record(t_ns: int, pod: tuple[str, str], reason: str, type_: str, message: str, *, container: str = "",
            component: str = "kubelet", node: str = _NODE, kind: str = "Pod") -> dict[str, Any]:
    ns, name = pod
    return {
        "t_ns": t_ns,
        "source_component": component,
        "source_host": node if component == "kubelet" else "",
        "involved": {
            "kind": kind,
            "namespace": ns,
            "name": name,
            "uid": _uid(f"{kind.lower()}/{ns}/{name}"),
            "api_version": "v1" if kind == "Pod" else _API_VERSIONS[kind],
            "field_path": f"spec.containers{{{container}}}" if container else "",
        },
        "type": type_,
        "reason": reason,
        "message": message,
    }


_API_VERSIONS = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def kubelet_storm(seed: int = 7, minutes: int = 60) -> list[dict[str, Any]]:
    """An hour of one node during an incident, as its kubelet (and the scheduler) record it.

    About seven thousand events: a rollout whose new pods crash-loop (restart back-off from 10 s to 5 min,
    BackOff on every sync), pods stuck on an image that does not exist (ErrImagePull, ImagePullBackOff),
    a search cluster whose readiness probe reports a changing shard count (messages that differ every time,
    which the correlator aggregates), and batch pods missing a dozen secrets (FailedMount per volume).
    Deterministic for a given seed; records are in time order.
    """
    out = _node_storm(seed, minutes, _NODE, "", controllers=False)
    out.sort(key=lambda r: r["t_ns"])
    return out


def cluster_storm(nodes: int = 200, *, seed: int = 7, minutes: int = 60, controllers: bool = True) -> pyarrow.Table:
    """An hour of a cluster during an incident, as its API server's clients record it: ``kubelet_storm`` on
    each of ``nodes`` nodes (``node-0``, ``node-1``, ...; node ``k`` with the seed ``seed + k`` and its own
    pods, whose names end in ``-n<k>``), the scheduler's ``Scheduled`` events for all of them and, with
    ``controllers``, the ``SuccessfulCreate`` events of the controllers that made the pods (the replica sets of
    the crash-looping rollout and of the workers, shared by all nodes, and each node's export job).

    About 7,000 events per node, so 1.4 million for the default 200 nodes: one source per kubelet, plus
    ``default-scheduler``, ``replicaset-controller`` and ``job-controller``. The records of each node are those
    of ``kubelet_storm(seed + k)`` (with the node's name and pods), merged in time order, ties in node order.
    Returns a pyarrow ``Table`` with the columns of ``TABLE_COLUMNS`` (needs pyarrow), which ``simulate``
    splits over threads by source; ``to_parquet`` or ``partition_by_source`` write it.
    """
    _check_storm(nodes, minutes)
    pa = _pyarrow()
    tables = [to_arrow(_cluster_node(seed, minutes, k, controllers)) for k in range(nodes)]
    # Arrow's sort is stable: records of one time keep their node order.
    return pa.concat_tables(tables, promote_options="default").sort_by("t_ns").combine_chunks()


def write_cluster_storm(root: str | os.PathLike[str], nodes: int = 200, *, seed: int = 7, minutes: int = 60,
                        controllers: bool = True, executor: Executor | None = None,
                        compression: str = "zstd") -> int:
    """Writes the trace of ``cluster_storm`` (same arguments, same records) as Parquet partitioned by source
    under ``root`` (the layout of ``partition_by_source``, one ``part-0.parquet`` per source, each source's
    records in trace order), node by node, without making the whole trace; returns the number of records.

    Each node's records are made, sorted, and its kubelet's written before the next node's are made, so
    memory holds one node's records (about 7,000 an hour, 165,000 a day) besides the records of the shared
    sources (``default-scheduler``, ``replicaset-controller``, ``job-controller``), which are written last,
    in time order with ties in node order as in ``cluster_storm``. Those grow with the number of pods, not
    with ``minutes``: the controllers create each node's 13 pods once and the scheduler places them once,
    26 records per node (13 without ``controllers``). With ``executor`` (e.g. a ``ProcessPoolExecutor``),
    the nodes are made and written on its workers, which must reach ``root``; each worker holds one node's
    records at a time.

    ``root`` must not hold Parquet files already. A day of 1,000 nodes (``minutes=1440``) is 165 million
    records, 2 GB of Parquet; ``simulate(root)``, with an executor or without, replays it with memory bounded
    by the sources in flight (see ``kubevents.simulate``; figures in BENCHMARKS.md, "A day of 1,000 nodes,
    streamed to Parquet").

    Example: ``write_cluster_storm("cluster-day/", nodes=1000, minutes=1440,
    executor=ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn")))``.
    """
    _check_storm(nodes, minutes)
    fs, base = _partitions.empty_root(root)
    # Workers may run with another working directory: a local root travels as an absolute path.
    where = os.fspath(root) if "://" in os.fspath(root) else base
    args = (where, seed, minutes, controllers, compression)
    if executor is None:
        written = [_write_cluster_node(*args, k) for k in range(nodes)]
    else:
        written = _partitions.gather([executor.submit(_write_cluster_node, *args, k) for k in range(nodes)])
    # heapq.merge is stable: records of one time come in node order, as cluster_storm's stable sort leaves them.
    shared: dict[str, list[dict[str, Any]]] = {}
    for r in heapq.merge(*(records for _, records in written), key=lambda r: r["t_ns"]):
        shared.setdefault(r["source_component"], []).append(r)
    for component, records in shared.items():
        _partitions.write_source(fs, base, component, "", to_arrow(records), compression)
    return sum(n for n, _ in written) + sum(map(len, shared.values()))


def _check_storm(nodes: object, minutes: object) -> None:
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be an int >= 1, got {nodes!r}")
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 1:
        raise ValueError(f"minutes must be an int >= 1, got {minutes!r}")


def _cluster_node(seed: int, minutes: int, k: int, controllers: bool) -> list[dict[str, Any]]:
    """The records of node ``k`` of ``cluster_storm``, in time order (ties in the order they were made)."""
    records = _node_storm(seed + k, minutes, f"node-{k}", f"-n{k}", controllers=controllers)
    records.sort(key=lambda r: r["t_ns"])
    return records


def _write_cluster_node(root: str, seed: int, minutes: int, controllers: bool, compression: str,
                        k: int) -> tuple[int, list[dict[str, Any]]]:
    """Writes the kubelet records of node ``k`` of ``cluster_storm`` under ``root``; returns how many, and the
    node's records of the shared sources, in time order."""
    records = _cluster_node(seed, minutes, k, controllers)
    kubelet = [r for r in records if r["source_component"] == "kubelet"]
    fs, base = _partitions.filesystem(root)
    _partitions.write_source(fs, base, "kubelet", f"node-{k}", to_arrow(kubelet), compression)
    return len(kubelet), [r for r in records if r["source_component"] != "kubelet"]


def _node_storm(seed: int, minutes: int, node: str, tag: str, *, controllers: bool) -> list[dict[str, Any]]:
    """The records of ``kubelet_storm`` on ``node``, its pods' names ending in ``tag``; with ``controllers``,
    also the events of the controllers that created the pods. Not sorted."""
    rng = random.Random(seed)
    end = _T0 + minutes * 60 * _S
    out: list[dict[str, Any]] = []

    def created(t: float, owner: tuple[str, str], kind: str, component: str, message: str) -> None:
        if controllers:
            out.append(_record(at(t - 0.5), owner, "SuccessfulCreate", "Normal", message, component=component,
                               kind=kind))

    def at(seconds: float) -> int:
        return _T0 + int(seconds * _S)

    def jitter(base: float) -> float:
        return base * (0.9 + 0.2 * rng.random())

    def start_pod(t: float, pod: tuple[str, str], image: str, container: str) -> float:
        out.append(_record(at(t), pod, "Scheduled", "Normal", f"Successfully assigned {pod[0]}/{pod[1]} to {node}",
                           component="default-scheduler"))
        out.append(_record(at(t + 1), pod, "Pulling", "Normal", f'Pulling image "{image}"', container=container,
                           node=node))
        return t + 1

    def rec(t_ns: int, pod: tuple[str, str], reason: str, type_: str, message: str, *,
            container: str = "") -> dict[str, Any]:
        return _record(t_ns, pod, reason, type_, message, container=container, node=node)

    # A rollout whose new version crash-loops: restarts back off 10 s, 20 s, ... 300 s; every sync while
    # waiting reports BackOff.
    for i in range(6):
        pod = ("shop", f"checkout-7d9f8c6b5-{i:02d}x{rng.randrange(100, 999)}{tag}")
        image = "registry.corp/shop/checkout:v4.2.0"
        t0 = rng.uniform(0, 60)
        created(t0, ("shop", "checkout-7d9f8c6b5"), "ReplicaSet", "replicaset-controller", f"Created pod: {pod[1]}")
        t = start_pod(t0, pod, image, "app")
        out.append(rec(at(t + 3), pod, "Pulled", "Normal",
                           f'Successfully pulled image "{image}" in 2.{rng.randrange(10, 99)}s', container="app"))
        delay, restarts = 10.0, 0
        t += 4
        while at(t) < end:
            out.append(rec(at(t), pod, "Created", "Normal", "Created container app", container="app"))
            out.append(rec(at(t + 0.2), pod, "Started", "Normal", "Started container app", container="app"))
            t += jitter(3)  # the process dies after a few seconds
            restarts += 1
            wake = t + delay
            while t < wake and at(t) < end:
                out.append(rec(at(t), pod, "BackOff", "Warning",
                                   f"Back-off restarting failed container app in pod {pod[1]}_{pod[0]}({pod[1][-6:]})",
                                   container="app"))
                t += jitter(10)
            t = wake
            if at(t) < end:
                out.append(rec(at(t), pod, "Pulled", "Normal",
                                   f'Container image "{image}" already present on machine', container="app"))
            delay = min(delay * 2, 300.0)

    # Pods pinned to an image tag that was never pushed.
    for i in range(4):
        pod = ("reports", f"reports-worker-{i}{tag}")
        image = "registry.corp/reports/worker:v2.3.1"
        t0 = rng.uniform(0, 120)
        created(t0, ("reports", "reports-worker-5c8d7"), "ReplicaSet", "replicaset-controller",
                f"Created pod: {pod[1]}")
        t = start_pod(t0, pod, image, "worker")
        delay = 10.0
        while at(t) < end:
            out.append(rec(at(t), pod, "Failed", "Warning",
                               f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and '
                               f'unpack image "{image}": not found', container="worker"))
            out.append(rec(at(t + 0.01), pod, "Failed", "Warning", "Error: ErrImagePull", container="worker"))
            wake = t + delay
            t += 1
            while t < wake and at(t) < end:
                out.append(rec(at(t), pod, "BackOff", "Normal", f'Back-off pulling image "{image}"',
                                   container="worker"))
                out.append(rec(at(t + 0.01), pod, "Failed", "Warning", "Error: ImagePullBackOff",
                                   container="worker"))
                t += jitter(15)
            t = wake
            out.append(rec(at(t), pod, "Pulling", "Normal", f'Pulling image "{image}"', container="worker"))
            delay = min(delay * 2, 300.0)

    # A search cluster degrading: the probe output (shard counts, latency) changes on every failure.
    for i in range(3):
        pod = ("search", f"search-data-{i}{tag}")
        t = rng.uniform(300, 600)
        unassigned = rng.randrange(20, 40)
        while at(t) < end:
            unassigned = max(0, unassigned + rng.choice((-2, -1, 0, 1, 2, 3)))
            message = (f'Readiness probe failed: {{"cluster":"search","status":"red",'
                       f'"unassigned_shards":{unassigned},"took_ms":{rng.randrange(900, 3000)}}}')
            out.append(rec(at(t), pod, "Unhealthy", "Warning", message, container="elasticsearch"))
            if rng.random() < 0.2:
                out.append(rec(at(t + 0.5), pod, "Unhealthy", "Warning",
                                   f'Liveness probe failed: Get "http://10.4.7.{20 + i}:9200/_cluster/health": '
                                   'context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
                                   container="elasticsearch"))
            t += jitter(10)

    # Batch pods whose secrets were deleted: every mount retry reports each missing volume.
    for i in range(3):
        pod = ("batch", f"nightly-export-{i}{tag}")
        t = rng.uniform(0, 300)
        created(t, ("batch", f"nightly-export{tag}"), "Job", "job-controller", f"Created pod: {pod[1]}")
        out.append(_record(at(t), pod, "Scheduled", "Normal", f"Successfully assigned batch/{pod[1]} to {node}",
                           component="default-scheduler"))
        retry = 0.5
        while at(t) < end:
            for v in range(12):
                out.append(rec(at(t + v * 0.01), pod, "FailedMount", "Warning",
                                   f'MountVolume.SetUp failed for volume "creds-{v}" : secret "export-creds-{v}" '
                                   "not found"))
            t += retry
            retry = min(retry * 2, 122.0)

    return out


# --- Synthetic workloads, JSON Lines files and traces from real clusters -------------------------------------

__all__ += ["MAX_COUNT", "WORKLOADS", "KubectlTrace", "Workload", "from_kubectl", "generate", "read_jsonl",
            "write_jsonl"]

_BASE_NS = 1_700_000_000_000_000_000
_MS = 1_000_000


def _w_pod(i: int, namespace: str = "default", field_path: str = "") -> dict[str, str]:
    return {"kind": "Pod", "namespace": namespace, "name": f"pod-{i}", "uid": f"uid-pod-{i}",
            "api_version": "v1", "field_path": field_path}


def _w_event(t_ns: int, involved: dict[str, str], type_: str, reason: str, message: str,
             host: str = "node-0") -> dict[str, Any]:
    return {"t_ns": t_ns, "source_component": "kubelet", "source_host": host, "involved": involved,
            "type": type_, "reason": reason, "message": message}


def _unique(n: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield _w_event(_BASE_NS + i * _MS, _w_pod(i), "Normal", "Scheduled",
                       f"Successfully assigned default/pod-{i} to node-{i % 50}", host=f"node-{i % 50}")


def _identical(n: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    for i in range(n):
        k = (i * 7919) % 200
        yield _w_event(_BASE_NS + i * 50 * _MS, _w_pod(k, field_path="spec.containers{app}"), "Warning", "BackOff",
                       f"Back-off restarting failed container app in pod pod-{k}", host=f"node-{k % 20}")


def _similar(n: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    for i in range(n):
        k = rng.randrange(100)
        j = rng.randrange(30)
        yield _w_event(_BASE_NS + i * 20 * _MS, _w_pod(k), "Warning", "FailedMount",
                       f"MountVolume.SetUp failed for volume \"vol-{j}\" : secret \"s-{j}\" not found",
                       host=f"node-{k % 20}")


_MIXED_REASONS = [
    # reason, type, weight, variants, message template
    ("Pulling", "Normal", 14, 3, "Pulling image \"registry.local/app:v{v}\""),
    ("Pulled", "Normal", 14, 3, "Successfully pulled image \"registry.local/app:v{v}\" in {v}.2s"),
    ("Created", "Normal", 14, 2, "Created container c{v}"),
    ("Started", "Normal", 14, 2, "Started container c{v}"),
    ("BackOff", "Warning", 20, 2, "Back-off restarting failed container c{v} in pod {pod}"),
    ("Unhealthy", "Warning", 12, 4, "Readiness probe failed: HTTP probe failed with statuscode: 50{v}"),
    ("FailedMount", "Warning", 6, 5, "MountVolume.SetUp failed for volume \"vol-{v}\" : configmap not found"),
    ("Killing", "Normal", 6, 2, "Stopping container c{v}"),
]


def _mixed(n: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    weights = [r[2] for r in _MIXED_REASONS]
    t = _BASE_NS
    last_by_pod: dict[int, dict[str, Any]] = {}
    for _ in range(n):
        t += max(1, int(rng.expovariate(1.0 / (5 * _MS))))
        k = int(5000 * rng.random() ** 2.5)  # skewed: a few pods are much busier than the rest
        if k in last_by_pod and rng.random() < 0.10:
            ev = dict(last_by_pod[k])
            ev["t_ns"] = t
            yield ev
            continue
        reason, type_, _, variants, template = rng.choices(_MIXED_REASONS, weights)[0]
        v = rng.randrange(variants)
        field_path = f"spec.containers{{c{v % 2}}}" if reason in ("Created", "Started", "BackOff", "Killing") else ""
        ev = _w_event(t, _w_pod(k, namespace=f"ns-{k % 40}", field_path=field_path), type_, reason,
                      template.format(v=v, pod=f"pod-{k}"), host=f"node-{k % 100}")
        last_by_pod[k] = ev
        yield ev


def _storm(n: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    for i in range(n):
        k = i % 20
        yield _w_event(_BASE_NS + i * _MS, _w_pod(k, field_path="spec.containers{app}"), "Warning", "BackOff",
                       "Back-off restarting failed container app", host="node-0")


WORKLOADS: dict[str, Callable[[int, random.Random], Iterator[dict[str, Any]]]] = {
    "unique": _unique, "identical": _identical, "similar": _similar, "mixed": _mixed, "storm": _storm,
}
"""The synthetic workloads of ``generate``:

* ``unique``: every event about a different pod, reason Scheduled; +1 ms per event.
* ``identical``: 200 pods, the same BackOff message per pod, visited in a scrambled order; +50 ms per event.
* ``similar``: 100 pods, FailedMount with 30 message variants per pod; +20 ms per event.
* ``mixed``: 5000 pods (a few much busier than the rest), 8 kubelet reasons with realistic weights and a few
  variants each, exponential gaps (mean 5 ms), about 10 % immediate repeats.
* ``storm``: 20 pods, identical Warning BackOff, +1 ms per event: exercises the spam filter.
"""


class Workload:
    """A synthetic trace that can be iterated again and again, each time with the same records.

    ``len()`` is the number of records; ``list(w)`` materialises them.
    """

    def __init__(self, workload: str, n: int, seed: int) -> None:
        if workload not in WORKLOADS:
            raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(sorted(WORKLOADS))}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        self.workload, self.n, self.seed = workload, n, seed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return WORKLOADS[self.workload](self.n, random.Random(self.seed))

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"Workload({self.workload!r}, n={self.n}, seed={self.seed})"


def generate(workload: str, n: int = 100_000, seed: int = 1) -> Workload:
    """The records of a synthetic workload (see ``WORKLOADS``), deterministic for ``(workload, n, seed)``.

    The same generators, with the same records for the same seed, as the project's benchmark script.
    """
    return Workload(workload, n, seed)


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> int:
    """Writes records to a JSON Lines file (compact, one per line); returns how many were written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")))
            f.write("\n")
            n += 1
    return n


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yields the records of a JSON Lines file, skipping blank lines; a bad line raises ``ValueError`` naming
    it. (``simulate`` and ``sweep`` read paths natively, faster; this is for looking at records.)"""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {line_no}: {e}") from None


# kubectl's dumps hold the end points of each event's run of occurrences and their count, nothing between.
MAX_COUNT = 10**6
"""The largest ``count`` of one stored event that ``from_kubectl`` accepts; larger ones raise ``ValueError``. The
API allows up to 2^31 - 1, which would take an hour to replay; a million occurrences replay in about 2 s."""

_COMBINED = "(combined from similar events): "
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _parse_time(value: object, where: str) -> int:
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected an RFC 3339 string, got {type(value).__name__}")
    m = _RFC3339.match(value.strip())
    if not m:
        raise ValueError(f"{where}: not an RFC 3339 time: {value!r}")
    base, frac, zone = m.groups()
    dt = _dt.datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    seconds = int(dt.timestamp())
    return seconds * 10**9 + int((frac or "").ljust(9, "0"))


def _object(value: object, where: str) -> dict[str, Any]:
    """A JSON object field: a dict, or {} when missing or null; anything else is a TypeError naming it."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _string(obj: Mapping[str, Any], key: str, where: str) -> str:
    """A str field of a JSON object: "" when missing or null; anything else is a TypeError naming it."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{where}.{key}: expected a str, got {type(value).__name__}")
    return value


def _field(item: Mapping[str, Any], dotted: str, where: str) -> object:
    """The value at a dotted path of an item (None when missing); a parent that is not an object is an error."""
    *parents, last = dotted.split(".")
    for part in parents:
        where = f"{where}.{part}"
        item = _object(item.get(part), where)
    return item.get(last)


def _first_time(item: Mapping[str, Any], names: Iterable[str], where: str) -> int | None:
    for name in names:
        value = _field(item, name, where)
        if value:
            return _parse_time(value, f"{where}.{name}")
    return None


def _count(item: Mapping[str, Any], names: Iterable[str], where: str) -> int:
    """The first count field set (1 when none is), checked: a positive int at most ``MAX_COUNT``."""
    for name in names:
        count = _field(item, name, where)
        if count:
            break
    else:
        return 1
    if not isinstance(count, int) or isinstance(count, bool):
        raise TypeError(f"{where}.{name}: expected an int, got {type(count).__name__}")
    if count < 1:
        raise ValueError(f"{where}.{name}: must be a positive int, got {count}")
    if count > MAX_COUNT:
        raise ValueError(f"{where}.{name}: {count} is above the limit of {MAX_COUNT:,} occurrences per event "
                         "(kubevents.traces.MAX_COUNT)")
    return count


class _Shape(TypedDict):
    """Where one Event shape keeps the parts of a trace record."""

    reference: str
    source: str
    reporter: str
    message: str
    count: tuple[str, ...]
    first: tuple[str, ...]
    last: tuple[str, ...]


# Where each shape keeps the parts of a trace record; the first field present wins.
_CORE_V1: _Shape = {
    "reference": "involvedObject", "source": "source", "reporter": "reportingComponent", "message": "message",
    "count": ("count", "series.count"),
    "first": ("firstTimestamp", "eventTime", "metadata.creationTimestamp"),
    "last": ("lastTimestamp", "series.lastObservedTime", "eventTime"),
}
_EVENTS_V1: _Shape = {
    "reference": "regarding", "source": "deprecatedSource", "reporter": "reportingController", "message": "note",
    "count": ("series.count", "deprecatedCount"),
    "first": ("deprecatedFirstTimestamp", "eventTime", "metadata.creationTimestamp"),
    "last": ("deprecatedLastTimestamp", "series.lastObservedTime", "eventTime"),
}


def _involved(ref: object, where: str) -> dict[str, str]:
    if not isinstance(ref, dict):
        raise TypeError(f"{where}: expected an object reference, got {type(ref).__name__}")
    out: dict[str, str] = {}
    for camel, snake in (("kind", "kind"), ("namespace", "namespace"), ("name", "name"), ("uid", "uid"),
                         ("apiVersion", "api_version"), ("resourceVersion", "resource_version"),
                         ("fieldPath", "field_path")):
        v = ref.get(camel) or ""
        if not isinstance(v, str):
            raise TypeError(f"{where}.{camel}: expected a str, got {type(v).__name__}")
        out[snake] = v
    return out


# What ``_occurrences`` returns.
_Occurrences = tuple[dict[str, str], str, str, str, str, str, int, int, int]


def _occurrences(item: object, where: str) -> _Occurrences:
    """(involved, source component, host, type, reason, message, count, first, last) of one stored event."""
    if not isinstance(item, dict):
        raise TypeError(f"{where}: expected an Event object, got {type(item).__name__}")
    events_v1 = "regarding" in item or str(item.get("apiVersion", "")).startswith("events.k8s.io/")
    shape = _EVENTS_V1 if events_v1 else _CORE_V1
    involved = _involved(item.get(shape["reference"]) or {}, f"{where}.{shape['reference']}")
    source_where = f"{where}.{shape['source']}"
    source = _object(item.get(shape["source"]), source_where)
    component = _string(source, "component", source_where) or _string(item, shape["reporter"], where)
    host = _string(source, "host", source_where) or _string(item, "reportingInstance", where)
    message = _string(item, shape["message"], where)
    type_, reason = _string(item, "type", where), _string(item, "reason", where)
    count = _count(item, shape["count"], where)
    first = _first_time(item, shape["first"], where)
    last = _first_time(item, shape["last"], where)
    if first is None:
        raise ValueError(f"{where}: no time (firstTimestamp, eventTime or metadata.creationTimestamp)")
    last = first if last is None or last < first else last
    if message.startswith(_COMBINED):
        message = message[len(_COMBINED):]
    return (involved, component, host, type_, reason, message, count, first, last)


def _occurrence_record(event: _Occurrences, t_ns: int) -> dict[str, Any]:
    """The record of one occurrence of a stored event, at ``t_ns``."""
    involved, component, host, type_, reason, message = event[:6]
    return {"t_ns": t_ns, "source_component": component, "source_host": host, "involved": dict(involved),
            "type": type_, "reason": reason, "message": message}


def _expand(event: _Occurrences) -> Iterator[dict[str, Any]]:
    """The records of one stored event's occurrences, in time order."""
    count, first, last = event[6:]
    span = last - first
    for k in range(count):
        yield _occurrence_record(event, first + span * k // (count - 1) if count > 1 else first)


class KubectlTrace:
    """The trace of a ``kubectl get events`` dump (see ``from_kubectl``): each stored event's occurrences,
    made as they are iterated, so a count costs no memory. It can be iterated again and again, each time with
    the same records in time order; ``len()`` is the number of occurrences, ``events`` the number of stored
    events, ``list(trace)`` materialises the records.
    """

    def __init__(self, events: list[_Occurrences]) -> None:
        self._events = events
        self._len = sum(e[6] for e in events)

    @property
    def events(self) -> int:
        """The number of stored events in the dump."""
        return len(self._events)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Each event's occurrences are in time order; merging them keeps ties in the dump's order.
        return heapq.merge(*map(_expand, self._events), key=lambda r: r["t_ns"])

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"<KubectlTrace: {self._len} occurrences of {len(self._events)} events>"

    def to_arrow(self) -> Any:
        """The occurrences as a pyarrow ``Table`` (``to_arrow``), e.g. to keep the dump as a Parquet trace."""
        return to_arrow(self)


def from_kubectl(path_or_obj: str | os.PathLike[str] | Mapping[str, Any] | list[Any]) -> KubectlTrace:
    """A trace from ``kubectl get events -A -o json`` (core/v1 Events) or
    ``kubectl get events.v1.events.k8s.io -A -o json`` (events.k8s.io/v1): a path to the JSON, or the parsed
    object (a List with ``items``, or a list of Events).

    A stored event is a run of ``count`` occurrences (``series.count`` for events recorded through the events.k8s.io
    API, ``deprecatedCount`` in its own shape) between its first and last timestamp; the dump keeps only those
    three numbers, so the occurrences are spread evenly: occurrence ``k`` of ``n`` at
    ``first + k * (last - first) / (n - 1)`` (rounded down to the nanosecond), so the first is at
    ``firstTimestamp`` and the last at ``lastTimestamp``. Where a timestamp
    is missing, ``eventTime``, ``series.lastObservedTime`` and ``metadata.creationTimestamp`` stand in. The source is
    ``source`` (``deprecatedSource``), else the reporting controller and instance. A "(combined from similar
    events)" event keeps only its group's latest message, which its occurrences replay without the prefix.

    The dump holds what reached the API server, so occurrences that a client's spam filter dropped are not in
    it. The records come in time order (ties keep the dump's order).

    The dump is read and checked at once: a file that is not JSON raises ``ValueError`` naming it and the line;
    a field of the wrong type raises ``TypeError`` and a bad value ``ValueError``, naming the item and the field
    (``items[3].count``); a count above ``MAX_COUNT`` (one million) is refused. The occurrences are made only as
    the returned ``KubectlTrace`` is iterated, which ``simulate``, ``sweep`` and the plots do.
    """
    obj = path_or_obj
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        with open(path, encoding="utf-8") as f:
            try:
                obj = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {e.lineno} column {e.colno}: {e.msg}") from None
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if isinstance(obj, Mapping):
        if "items" not in obj:
            raise ValueError("expected a List with 'items' (kubectl get events -A -o json)")
        items = obj["items"] or []
        if not isinstance(items, list):
            raise TypeError(f"items: expected a list of Events, got {type(items).__name__}")
    elif isinstance(obj, list):
        items = obj
    else:
        raise TypeError(f"expected a path, a List object or a list of Events, got {type(obj).__name__}")
    return KubectlTrace([_occurrences(item, f"items[{i}]") for i, item in enumerate(items)])


# --- Traces partitioned by source (kubevents._partitions) -------------------------------------------------------

from kubevents._partitions import partition_by_source  # noqa: E402

__all__ += ["partition_by_source"]
