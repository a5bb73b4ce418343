"""kubevents.plots: what each plot draws is the replay's or the sweep's numbers."""

from __future__ import annotations

import math

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import kubevents  # noqa: E402
from kubevents import plots  # noqa: E402
from kubevents.traces import generate, write_jsonl  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_writes_over_time_draws_every_event_and_every_write(tmp_path):
    trace = list(generate("storm", n=2000, seed=1))
    ax = plots.writes_over_time(trace, bin_s=0.5, burst=10)
    without, through = ax.lines
    totals = kubevents.simulate(trace, burst=10).totals
    assert sum(without.get_ydata()) * 0.5 == pytest.approx(2000)
    assert sum(through.get_ydata()) * 0.5 == pytest.approx(totals["creates"] + totals["patches"])
    path = tmp_path / "storm.jsonl"
    write_jsonl(trace, path)
    again = plots.writes_over_time(path, bin_s=0.5, burst=10, log=True)
    assert list(again.lines[1].get_ydata()) == list(through.get_ydata())
    assert again.get_yscale() == "log"


def test_heatmap_shows_the_sweep():
    rows = kubevents.sweep(generate("mixed", n=1500, seed=1), {"burst": [2, 25], "max_events": [3, 10, 20]},
                           progress=False)
    ax = plots.heatmap(rows, "burst", "max_events", "message_share")
    data = ax.images[0].get_array()
    assert data.shape == (3, 2)
    for r in rows:
        i = [2, 25].index(r["burst"])
        j = [3, 10, 20].index(r["max_events"])
        assert data[j][i] == r["message_share"]
    assert len(ax.texts) == 6
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "25"]


def test_heatmap_marks_missing_cells_and_rejects_ambiguous_rows():
    rows = [{"burst": 1, "qps": 0.5, "writes": 3}, {"burst": 2, "qps": 1.0, "writes": 4}]
    data = plots.heatmap(rows, "burst", "qps").images[0].get_array()
    assert data[0, 0] == 3 and data[1, 1] == 4
    assert data.mask[0, 1] or math.isnan(data.data[0, 1])
    with pytest.raises(ValueError, match="more than once"):
        plots.heatmap(rows + [{"burst": 1, "qps": 0.5, "writes": 9}], "burst", "qps")
    with pytest.raises(ValueError, match="no 'nope'"):
        plots.heatmap(rows, "burst", "nope")


def test_budget_timeline_has_a_lane_per_object_with_its_drops():
    trace = list(generate("storm", n=1000, seed=1))
    ax = plots.budget_timeline(trace, objects=3, burst=5)
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert len(lanes) == 3 and all(lane.startswith("Pod default/pod-") for lane in lanes)
    written, dropped = ax.collections[0], ax.collections[1]
    # storm: 20 pods, 50 events each; with burst 5 each pod gets 5 writes and 45 drops.
    assert len(written.get_offsets()) == 5 and len(dropped.get_offsets()) == 45


def test_bad_arguments():
    with pytest.raises(ValueError, match="bin_s"):
        plots.writes_over_time([], bin_s=0)
    with pytest.raises(ValueError, match="objects"):
        plots.budget_timeline([], objects=0)
    assert len(plots.writes_over_time([]).lines) == 0
