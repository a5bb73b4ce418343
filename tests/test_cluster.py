"""Replays of a cluster's trace: one correlator per event source, the API server's whole load, and one trace
split over threads, executors and a Dask cluster with equal results."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

import kubevents
from kubevents import traces

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")


@pytest.fixture(scope="module")
def cluster20():
    """20 nodes of the built-in storm, with the scheduler and controllers: about 140,000 events."""
    return traces.cluster_storm(nodes=20)


@pytest.fixture(scope="module")
def small():
    """A small cluster: 4 nodes, a quarter of an hour."""
    return traces.cluster_storm(nodes=4, minutes=15, seed=3)


def sources_of(table):
    return sorted(set(zip(table["source_component"].to_pylist(), table["source_host"].to_pylist(), strict=True)))


def only(table, component, host):
    return table.filter(pc.and_(pc.equal(table["source_component"], component), pc.equal(table["source_host"], host)))


def everything(sim, per_object=True):
    """All a replay reports (and its decisions when asked), for comparisons."""
    out = {"totals": sim.totals, "by_source": sim.by_source(), "by_component": sim.by_component(),
           "metrics": sim.metrics, "source_metrics": sim.source_metrics(),
           "component_metrics": sim.component_metrics()}
    if per_object:
        out["objects"] = sim.object_metrics()
        out["top"] = sim.top_objects(50)
    return out


# --- one correlator per source ---------------------------------------------------------------------------------


def test_the_cluster_trace_has_a_source_per_kubelet_and_controller(cluster20):
    sources = sources_of(cluster20)
    kubelets = [s for s in sources if s[0] == "kubelet"]
    assert len(kubelets) == 20 and len({h for _, h in kubelets}) == 20
    assert {s[0] for s in sources} == {"kubelet", "default-scheduler", "replicaset-controller", "job-controller"}
    t = cluster20["t_ns"].to_pylist()
    assert t == sorted(t)
    # Each node's kubelet records are the built-in storm's (with its own node and pods).
    node0 = only(cluster20, "kubelet", "node-0")
    storm = [r for r in traces.kubelet_storm(seed=7) if r["source_component"] == "kubelet"]
    assert node0.num_rows == len(storm)
    assert node0["reason"].to_pylist() == [r["reason"] for r in storm]


def test_per_source_is_exactly_each_source_replayed_alone(cluster20):
    """The 200-node experiment, at 20 nodes: per source, the sum of the sources replayed alone."""
    sim = kubevents.simulate(cluster20, metrics=True)
    assert sim.correlators == "per-source"
    by_source = {(r["source_component"], r["source_host"]): r for r in sim.by_source()}
    metrics = {(r["source_component"], r["source_host"]): r for r in sim.source_metrics()}
    assert sorted(by_source) == sources_of(cluster20)
    sums = dict.fromkeys(("events", "creates", "patches", "skips", "aggregated"), 0)
    for (component, host), row in by_source.items():
        alone = kubevents.simulate(only(cluster20, component, host), metrics=True, correlators="shared")
        assert {k: row[k] for k in alone.totals} == alone.totals, (component, host)
        assert {k: v for k, v in metrics[(component, host)].items() if not k.startswith("source_")} == alone.metrics
        for k in sums:
            sums[k] += alone.totals[k]
    assert sim.totals == sums
    kubelet = next(c for c in sim.by_component() if c["source_component"] == "kubelet")
    assert kubelet["sources"] == 20
    assert kubelet["writes"] == sum(r["writes"] for k, r in by_source.items() if k[0] == "kubelet")


def test_one_shared_correlator_overstates_a_clusters_writes(cluster20):
    # Caches of 512 entries fill at 20 nodes as the default 4,096 do at a few hundred.
    shared = kubevents.simulate(cluster20, lru_cache_size=512, correlators="shared")
    per_source = kubevents.simulate(cluster20, lru_cache_size=512)
    assert shared.correlators == "shared"
    assert shared.totals["events"] == per_source.totals["events"]
    assert shared.totals["creates"] > 2 * per_source.totals["creates"]
    assert shared.totals["creates"] + shared.totals["patches"] > per_source.totals["creates"] + per_source.totals[
        "patches"]
    # A shared replay still counts by source, but has no metrics of each source's own.
    assert sum(r["events"] for r in shared.by_source()) == shared.totals["events"]
    with pytest.raises(TypeError, match="one correlator per source"):
        kubevents.simulate(cluster20[:100], metrics=True, correlators="shared").source_metrics()


def test_the_servers_load_peaks_over_all_sources(small):
    sim = kubevents.simulate(small, metrics=True, window=10)
    m = sim.metrics
    own = sim.source_metrics()
    assert max(r["peak_writes"] for r in own) <= m["peak_writes"] <= sum(r["peak_writes"] for r in own)
    assert 0 <= m["p50_write_rate"] <= m["p90_write_rate"] <= m["p99_write_rate"] <= m["peak_write_rate"]
    assert m["writes"] == sum(r["writes"] for r in own)
    components = sim.component_metrics()
    assert [c["source_component"] for c in components][0] == "kubelet"
    assert sum(c["events"] for c in components) == m["events"]
    assert sim.to_pandas(by="component")["source_component"].tolist() == [c["source_component"] for c in components]
    table = pa.table(sim.to_arrow(by="source"))
    assert table.column_names[:2] == ["source_component", "source_host"]
    assert table.num_rows == len(sources_of(small))


def test_decisions_keep_the_source_and_follow_each_sources_own_replay(small):
    sim = kubevents.simulate(small, burst=5)
    decisions = list(sim.decisions())
    assert [d["index"] for d in decisions] == list(range(small.num_rows))
    for component, host in sources_of(small)[:3]:
        mine = [d for d in decisions if (d["source_component"], d["source_host"]) == (component, host)]
        alone = list(kubevents.simulate(only(small, component, host), burst=5, correlators="shared").decisions())
        strip = [{k: v for k, v in d.items() if k != "index"} for d in mine]
        assert strip == [{k: v for k, v in d.items() if k != "index"} for d in alone]
    columns = pa.table(sim.decisions())
    assert columns.column_names[-2:] == ["source_component", "source_host"]
    assert columns["source_host"].to_pylist() == small["source_host"].to_pylist()


# --- threads, executors and partitions ----------------------------------------------------------------------


def test_threads_give_the_sequential_result(small, tmp_path):
    want = everything(kubevents.simulate(small, metrics=True, per_object=True, threads=1))
    for threads in (2, 3, 16):
        got = everything(kubevents.simulate(small, metrics=True, per_object=True, threads=threads))
        assert got == want, threads
    records = traces.to_records(small)
    assert everything(kubevents.simulate(records, metrics=True, per_object=True, threads=2)) == want
    path = tmp_path / "small.jsonl"
    traces.write_jsonl(records, path)
    assert everything(kubevents.simulate(path, metrics=True, per_object=True, threads=2)) == want
    parquet = tmp_path / "small.parquet"
    traces.to_parquet(small, parquet)
    streamed = kubevents.simulate(traces.scan_parquet(parquet), metrics=True, per_object=True, threads=2)
    assert everything(streamed) == want
    assert list(streamed.decisions()) == list(kubevents.simulate(small, threads=1).decisions())
    # A one-shot iterator is read once, whatever the threads.
    once = kubevents.simulate(iter(records), metrics=True, per_object=True, threads=2)
    assert everything(once) == want
    with pytest.raises(TypeError, match="one-shot iterator"):
        once.decisions()


def test_an_executor_gives_the_local_result(small):
    want = everything(kubevents.simulate(small, metrics=True, per_object=True))
    with ThreadPoolExecutor(3) as ex:
        sim = kubevents.simulate(small, metrics=True, per_object=True, executor=ex, chunksize=2)
    assert everything(sim) == want
    assert list(sim.decisions()) == list(kubevents.simulate(small).decisions())


def test_a_process_pool_gives_the_local_result(small):
    want = everything(kubevents.simulate(small, metrics=True, window=5), per_object=False)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        sim = kubevents.simulate(small, metrics=True, window=5, executor=ex)
    assert everything(sim, per_object=False) == want


def test_a_trace_partitioned_by_source_replays_where_it_lives(small, tmp_path):
    root = tmp_path / "trace"
    assert traces.partition_by_source(small, root) == len(sources_of(small))
    assert (root / "source_component=kubelet" / "source_host=node-0" / "part-0.parquet").is_file()
    assert (root / "source_component=job-controller" / "source_host=__HIVE_DEFAULT_PARTITION__").is_dir()
    import pyarrow.parquet as pq

    part = pq.read_table(root / "source_component=kubelet" / "source_host=node-1" / "part-0.parquet")
    assert "source_component" not in part.column_names
    assert part["involved.name"].to_pylist() == only(small, "kubelet", "node-1")["involved.name"].to_pylist()

    want = everything(kubevents.simulate(small, metrics=True, per_object=True))
    here = kubevents.simulate(root, metrics=True, per_object=True)
    assert everything(here) == want
    assert everything(kubevents.simulate(str(root), metrics=True, per_object=True, threads=1)) == want
    # The sources replayed apart here still give the decisions of one replay of the files in order.
    from kubevents import _partitions

    assert list(here.decisions()) == list(kubevents.simulate(_partitions.read(root)).decisions())
    seen = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            seen.append(args[1])
            return super().submit(fn, *args, **kwargs)

    with Recording(2) as ex:
        sim = kubevents.simulate(root, metrics=True, per_object=True, executor=ex, chunksize=3)
    assert everything(sim) == want
    # Each task got file paths (read where it runs), three sources' worth, each source's files apart.
    assert all(len(task) <= 3 and all(p.endswith(".parquet") for files in task for p in files) for task in seen)
    assert sum(len(task) for task in seen) == len(sources_of(small))
    with pytest.raises(TypeError, match="executor"):
        sim.decisions()
    rows = kubevents.sweep(root, {"burst": [5, 25]}, progress=False)
    assert rows[1]["writes"] == want["metrics"]["writes"]
    with pytest.raises(ValueError, match="holds Parquet files already"):
        traces.partition_by_source(small, root)


def test_a_hive_dataset_of_other_writers_replays_too(small, tmp_path):
    import pyarrow.dataset as ds

    # Partitioned by host alone: each directory holds whole sources, the component in the files.
    table = small.drop_columns(["annotations"]) if "annotations" in small.column_names else small
    ds.write_dataset(table, tmp_path / "by-host", format="parquet", partitioning=["source_host"],
                     partitioning_flavor="hive", preserve_order=True)
    want = everything(kubevents.simulate(small, metrics=True), per_object=False)
    with ThreadPoolExecutor(2) as ex:
        sim = kubevents.simulate(tmp_path / "by-host", metrics=True, executor=ex)
    assert everything(sim, per_object=False) == want


def read_by_source(root):
    """Each source's records in a dataset partitioned by source, in file order, as lists of records."""
    import pyarrow.parquet as pq

    out = {}
    for directory in sorted(root.glob("source_component=*/source_host=*")):
        component, host = (part.split("=", 1)[1] for part in directory.parts[-2:])
        host = "" if host == "__HIVE_DEFAULT_PARTITION__" else host
        out[(component, host)] = pa.concat_tables(pq.read_table(f) for f in sorted(directory.glob("*.parquet")))
    return out


@pytest.mark.parametrize("controllers", [True, False])
def test_a_cluster_storm_written_node_by_node_holds_cluster_storms_records(tmp_path, controllers):
    want = traces.cluster_storm(5, seed=11, minutes=10, controllers=controllers)
    root = tmp_path / "storm"
    assert traces.write_cluster_storm(root, 5, seed=11, minutes=10, controllers=controllers) == want.num_rows
    written = read_by_source(root)
    assert sorted(written) == sources_of(want)
    shared = {"default-scheduler", "replicaset-controller", "job-controller"} if controllers else {"default-scheduler"}
    assert {c for c, _ in written if c != "kubelet"} == shared
    for (component, host), table in written.items():
        # Per source, the same records in the same order (the shared sources' ties in node order).
        assert table.to_pylist() == only(want, component, host).drop_columns(list(_SOURCE)).to_pylist(), host
    # The same, made on an executor's workers.
    with ThreadPoolExecutor(2) as ex:
        traces.write_cluster_storm(tmp_path / "pooled", 5, seed=11, minutes=10, controllers=controllers,
                                   executor=ex)
    assert read_by_source(tmp_path / "pooled") == written


_SOURCE = ("source_component", "source_host")


def test_a_written_cluster_storm_replays_as_cluster_storm_does(tmp_path, monkeypatch):
    want_table = traces.cluster_storm(5, minutes=10)
    want = everything(kubevents.simulate(want_table, metrics=True, per_object=True))
    root = tmp_path / "storm"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        traces.write_cluster_storm(root, 5, minutes=10, executor=ex)
        on_processes = kubevents.simulate(root, metrics=True, per_object=True, executor=ex)
    assert everything(on_processes) == want
    assert everything(kubevents.simulate(root, metrics=True, per_object=True)) == want

    # A task, or a replay here, replays its sources a few at a time (as many as its threads), never all at once.
    from kubevents import _partitions

    replay, at_once = _partitions._replay_sources, []

    def counting(stream, **options):
        table = pa.table(stream)
        at_once.append(len(set(zip(*(table[k].to_pylist() for k in _SOURCE), strict=True))))
        return replay(table, **options)

    monkeypatch.setattr(_partitions, "_replay_sources", counting)
    for threads in (1, 2):
        with ThreadPoolExecutor(2) as ex:
            for executor in (ex, None):
                at_once.clear()
                sim = kubevents.simulate(root, metrics=True, per_object=True, executor=executor, threads=threads,
                                         chunksize=4 if executor else None)
                assert everything(sim) == want
                assert sum(at_once) == len(sources_of(want_table)) and max(at_once) == threads, (threads, at_once)


def test_a_cluster_storm_is_written_only_with_good_arguments(tmp_path):
    for nodes in (0, -1, True, 2.0, "3"):
        with pytest.raises(ValueError, match=f"nodes must be an int >= 1, got {nodes!r}"):
            traces.write_cluster_storm(tmp_path / "a", nodes)
    for minutes in (0, False, 1.5):
        with pytest.raises(ValueError, match=f"minutes must be an int >= 1, got {minutes!r}"):
            traces.write_cluster_storm(tmp_path / "a", 1, minutes=minutes)
    assert not (tmp_path / "a").exists()
    traces.write_cluster_storm(tmp_path / "a", 1, minutes=1)
    with pytest.raises(ValueError, match="holds Parquet files already"):
        traces.write_cluster_storm(tmp_path / "a", 1, minutes=1)


# --- a Dask cluster --------------------------------------------------------------------------------------------


def test_a_dask_local_cluster_gives_the_local_result(small, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    want = everything(kubevents.simulate(small, metrics=True, per_object=True))
    root = tmp_path / "trace"
    traces.partition_by_source(small, root)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        ex = client.get_executor()
        from_table = kubevents.simulate(small, metrics=True, per_object=True, executor=ex)
        from_files = kubevents.simulate(root, metrics=True, per_object=True, executor=ex, chunksize=2)
    assert everything(from_table) == want
    assert everything(from_files) == want


# --- options and errors ----------------------------------------------------------------------------------------


def test_sweeps_give_every_source_the_options(small):
    grid = {"burst": [3, 25], "lru_cache_size": [64]}
    rows = kubevents.sweep(small, grid, progress=False)
    assert rows.correlators == "per-source"
    for row in rows:
        sim = kubevents.simulate(small, burst=row["burst"], lru_cache_size=64, metrics=True)
        assert {k: row[k] for k in sim.metrics} == sim.metrics
    shared = kubevents.sweep(small, grid, progress=False, correlators="shared")
    assert shared.correlators == "shared"
    sim = kubevents.simulate(small, burst=3, lru_cache_size=64, metrics=True, correlators="shared")
    assert {k: shared[0][k] for k in sim.metrics} == sim.metrics
    with ThreadPoolExecutor(2) as ex:
        assert kubevents.sweep(small, grid, progress=False, executor=ex, chunksize=1) == rows


def test_bad_options_are_named(small):
    with pytest.raises(ValueError, match='correlators must be "per-source" or "shared", got "one"'):
        kubevents.simulate(small, correlators="one")
    with pytest.raises(TypeError, match="correlators: expected str"):
        kubevents.simulate(small, correlators=1)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        kubevents.simulate(small, threads=0)
    with pytest.raises(ValueError, match="needs correlators='per-source'"):
        kubevents.simulate(small, correlators="shared", executor=ThreadPoolExecutor(1))
    with pytest.raises(ValueError, match="chunksize applies to a replay on an executor"):
        kubevents.simulate(small, chunksize=2)
    sim = kubevents.simulate(small[:50], metrics=True)
    with pytest.raises(ValueError, match='by must be "source", "component" or None'):
        sim.to_arrow(by="node")
    with pytest.raises(ValueError, match="two different tables"):
        sim.to_arrow(objects=True, by="source")
    with pytest.raises(ValueError, match="correlators must be"):
        kubevents.sweep(small, {"burst": [1]}, correlators="per_source", progress=False)
    from kubevents._native import _merge_sources

    with pytest.raises(ValueError, match=r"parts\[0\]: not a replay"):
        _merge_sources([b"nonsense"])
    with pytest.raises(TypeError, match=r"parts\[0\]: expected the bytes"):
        _merge_sources(["text"])
    with pytest.raises(TypeError, match='unexpected option "bust"'):
        _merge_sources([], bust=3)
    with pytest.raises(ValueError, match="burst"):
        _merge_sources([], burst=-1)
    with pytest.raises(ValueError, match="no Parquet files"):
        kubevents.simulate(os.fspath(pytest.importorskip("pathlib").Path(__file__).parent / "integration"),
                           executor=ThreadPoolExecutor(1))


def test_events_v1_sources_are_their_reporting_controller_and_instance():
    def event(i, controller, instance):
        return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": f"e{i}", "namespace": "default"},
                "regarding": {"kind": "Pod", "namespace": "default", "name": f"p{i % 2}", "apiVersion": "v1"},
                "reportingController": controller, "reportingInstance": instance, "reason": "Failed",
                "type": "Warning", "note": f"failed {i}", "eventTime": f"2026-01-01T00:00:0{i}.000000Z",
                "series": {"count": 3, "lastObservedTime": f"2026-01-01T00:01:0{i}.000000Z"}}

    dump = [event(0, "example.com/operator", "operator-0"), event(1, "example.com/operator", "operator-1"),
            event(2, "kubelet", "node-1")]
    sim = kubevents.simulate(traces.from_kubectl(dump))
    assert sorted((r["source_component"], r["source_host"], r["events"]) for r in sim.by_source()) == [
        ("example.com/operator", "operator-0", 3), ("example.com/operator", "operator-1", 3),
        ("kubelet", "node-1", 3)]
    assert {d["source_host"] for d in sim.decisions()} == {"operator-0", "operator-1", "node-1"}
