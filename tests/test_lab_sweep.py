"""kubevents.sweep: one replay per grid combination, equal to a loop of simulate calls."""

from __future__ import annotations

import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

import kubevents
from kubevents.lab import METRICS, SweepResult, combinations
from kubevents.traces import generate, write_jsonl

GRID = {"burst": [2, 10, 25], "qps": [0.01, 0.5], "max_events": [3, 10]}


@pytest.fixture(scope="module")
def trace():
    return list(generate("mixed", n=3000, seed=4))


def expected(trace, grid, window=60.0):
    rows = []
    for values in itertools.product(*grid.values()):
        options = dict(zip(grid, values))
        m = kubevents.simulate(trace, metrics=True, window=window, **options).metrics
        rows.append({**options, **m})
    return rows


def test_sweep_equals_a_loop_of_simulate(trace):
    rows = kubevents.sweep(trace, GRID, workers=2, progress=False)
    assert isinstance(rows, SweepResult)
    assert rows == expected(trace, GRID)
    assert list(rows[0]) == ["burst", "qps", "max_events", *METRICS]
    # The grid matters: a small burst writes less and keeps less.
    assert rows[0]["writes"] < rows[-1]["writes"]
    assert rows[0]["message_share"] < rows[-1]["message_share"]


def test_one_worker_and_a_path_give_the_same_rows(trace, tmp_path):
    path = tmp_path / "t.jsonl"
    write_jsonl(trace, path)
    grid = {"burst": [3, 25], "lru_cache_size": [16, 4096], "max_interval": [5, 600]}
    rows = kubevents.sweep(str(path), grid, workers=1, progress=False, window=5)
    assert rows == expected(trace, grid, window=5)


def test_metric_selection_and_a_list_of_combinations(trace):
    combos = [{"burst": 5}, {"burst": 5, "qps": 1.0}]
    rows = kubevents.sweep(iter(trace), combos, metrics=["writes", "spam_skipped"], progress=False)
    assert [list(r) for r in rows] == [["burst", "qps", "writes", "spam_skipped"]] * 2
    assert rows[0]["qps"] is None  # not in the combination: client-go's default
    assert rows[0]["writes"] == kubevents.simulate(trace, burst=5).totals["creates"] + \
        kubevents.simulate(trace, burst=5).totals["patches"]
    assert rows[1]["spam_skipped"] < rows[0]["spam_skipped"]


def test_thread_pool_executor_in_chunks(trace):
    with ThreadPoolExecutor(3) as ex:
        rows = kubevents.sweep(trace, GRID, executor=ex, chunksize=5, progress=False)
    assert rows == expected(trace, GRID)


def test_process_pool_executor_with_a_path(trace, tmp_path):
    path = tmp_path / "t.jsonl"
    write_jsonl(trace, path)
    grid = {"burst": [2, 25]}
    # spawn: a forked child would inherit whatever threads the test process runs.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        rows = kubevents.sweep(path, grid, executor=ex, chunksize=1, progress=False)
    assert rows == expected(trace, grid)


def test_executor_gets_a_workload_as_it_is():
    workload = generate("storm", n=500, seed=2)
    seen = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            seen.append(args[0])
            return super().submit(fn, *args, **kwargs)

    with Recording(2) as ex:
        rows = kubevents.sweep(workload, {"burst": [1, 5]}, executor=ex, chunksize=1, progress=False)
    assert seen == [workload, workload]
    assert rows == expected(list(workload), {"burst": [1, 5]})


def test_progress_bar_counts_every_replay(trace, monkeypatch):
    tqdm = pytest.importorskip("tqdm")
    updates = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total = total

        def update(self, n):
            updates.append(n)

        def close(self):
            updates.append("closed")

    monkeypatch.setattr(tqdm, "tqdm", Bar)
    kubevents.sweep(trace, {"burst": [1, 2, 3]}, workers=2)
    assert updates == [1, 1, 1, "closed"]
    updates.clear()
    with ThreadPoolExecutor(2) as ex:
        kubevents.sweep(trace, {"burst": [1, 2, 3]}, executor=ex, chunksize=2)
    assert sorted(updates[:-1]) == [1, 2] and updates[-1] == "closed"
    updates.clear()
    kubevents.sweep(trace, {"burst": [1]}, progress=False)
    assert updates == []


def test_combinations():
    assert combinations({"burst": [1, 2], "qps": [0.1]}) == [{"burst": 1, "qps": 0.1}, {"burst": 2, "qps": 0.1}]
    assert combinations([{"burst": 1}]) == [{"burst": 1}]
    assert combinations({}) == [{}]


@pytest.mark.parametrize("grid, kwargs, exc, match", [
    ({"brust": [1]}, {}, ValueError, r'grid\[0\]: unknown option "brust"; the grid takes lru_cache_size, burst'),
    ({"burst": 5}, {}, TypeError, r"grid\['burst'\]: expected a list"),
    ("burst=5", {}, TypeError, "grid: expected a dict"),
    ({"burst": [-1]}, {}, ValueError, r"grid\[0\]: burst must be >= 0"),
    ({"burst": [1.5]}, {}, TypeError, r"grid\[0\]: burst must be an int"),
    ({"qps": ["x"]}, {}, TypeError, r"grid\[0\]: qps must be a number"),
    ([{"max_events": 1, "nope": 2}], {}, ValueError, r"grid\[0\]: unknown option"),
    ({"burst": [1]}, {"metrics": ["writes", "wrties"]}, ValueError, "unknown metric 'wrties'"),
    ({"burst": [1]}, {"workers": 0}, ValueError, "workers must be >= 1"),
    ({"burst": [1]}, {"chunksize": 0}, ValueError, "chunksize must be >= 1"),
    ({"burst": [1]}, {"window": 0}, ValueError, "window must be > 0"),
])
def test_bad_arguments(trace, grid, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        kubevents.sweep(trace[:10], grid, progress=False, **kwargs)


def test_bad_trace():
    with pytest.raises(TypeError, match="trace: expected a path or an iterable"):
        kubevents.sweep(42, {"burst": [1]}, progress=False)
    with pytest.raises(TypeError, match="trace item 1: record.t_ns"):
        kubevents.sweep([{"t_ns": 1, "involved": {}}, {"t_ns": "x"}], {"burst": [1]}, progress=False)
    with pytest.raises(FileNotFoundError):
        kubevents.sweep("/nonexistent/trace.jsonl", {"burst": [1]}, progress=False)


def test_an_error_in_the_progress_callback_stops_the_sweep(trace):
    from kubevents._native import replay_grid

    def boom(i, m):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        replay_grid(trace, [{"burst": b} for b in range(1, 30)], workers=2, on_result=boom)


def test_empty_grid_and_empty_trace():
    assert kubevents.sweep([], {"burst": [1, 2]}, progress=False, metrics=["events", "writes"]) == [
        {"burst": 1, "events": 0, "writes": 0}, {"burst": 2, "events": 0, "writes": 0}]
    assert kubevents.sweep([], [], progress=False) == []
