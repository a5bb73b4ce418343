"""kubevents.plots: what each plot draws is the replay's or the sweep's numbers."""

from __future__ import annotations

import math
import pathlib
import warnings

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import kubevents  # noqa: E402
from kubevents import plots  # noqa: E402
from kubevents._format import option_label, value_label  # noqa: E402
from kubevents.traces import from_kubectl, generate, kubelet_storm, write_jsonl  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def rates(ax):
    """The per-second rates of each of writes_over_time's step lines, and the bins' edges."""
    data = [patch.get_data() for patch in ax.patches]
    return [list(d.values) for d in data], list(data[0].edges)


def test_writes_over_time_draws_every_event_and_every_write(tmp_path):
    trace = list(generate("storm", n=2000, seed=1))
    ax = plots.writes_over_time(trace, bin_s=0.5, burst=10)
    (without, through), edges = rates(ax)
    totals = kubevents.simulate(trace, burst=10).totals
    assert sum(without) * 0.5 == pytest.approx(2000)
    assert sum(through) * 0.5 == pytest.approx(totals["creates"] + totals["patches"])
    assert edges[1] - edges[0] == 0.5 and ax.get_xlabel() == "seconds since the first event"
    path = tmp_path / "storm.jsonl"
    write_jsonl(trace, path)
    again = plots.writes_over_time(path, bin_s=0.5, burst=10, log=True)
    assert rates(again)[0][1] == through
    assert again.get_yscale() == "log"
    again.figure.canvas.draw()
    labels = [t.get_text() for t in again.get_yticklabels(minor=True) + again.get_yticklabels() if t.get_text()]
    assert labels and all("e" not in label and "times" not in label for label in labels), labels


def test_a_short_trace_gets_bins_from_its_span():
    """A 20 s trace in the default 60 s bins was an empty chart, without a word."""
    trace = list(generate("storm", n=20_000, seed=1))  # 20 s
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = plots.writes_over_time(trace)
    (without, _), edges = rates(ax)
    assert 20 <= len(without) <= 60 and sum(without) * (edges[1] - edges[0]) == pytest.approx(20_000)
    assert ax.get_ylabel() == "API writes per second (0.5 s bins)"
    with pytest.warns(UserWarning, match=r"spans 20 s, less than two bins of 60 s"):
        ax = plots.writes_over_time(trace, bin_s=60)
    # Even one bin is drawn, as a step of its width.
    (without, _), edges = rates(ax)
    assert without == [20_000 / 60] and edges == [0, 60]


def test_writes_over_time_of_an_hour_is_in_minutes():
    ax = plots.writes_over_time(kubelet_storm())
    (without, _), edges = rates(ax)
    assert ax.get_xlabel() == "minutes since the first event" and 30 <= len(without) <= 60
    assert sum(without) * (edges[1] - edges[0]) * 60 == pytest.approx(len(kubelet_storm()))


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
    assert ax.get_title() == "message_share for each burst and max_events"


def test_heatmap_writes_rates_and_counts_as_people_do():
    """qps was 0.00333333 without an axis label, cells 1.5e+03, and there was no title."""
    rows = kubevents.sweep(generate("mixed", n=3000, seed=1), {"burst": [5, 100], "qps": [1 / 300, 0.0033, 0.5]},
                           progress=False)
    ax = plots.heatmap(rows, "burst", "qps")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.0033", "1/300", "0.5"]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("burst", "qps", "writes for each burst and qps")
    writes = sorted(r["writes"] for r in rows)
    assert max(writes) >= 1000
    assert sorted(int(t.get_text()) for t in ax.texts) == writes
    assert plots.heatmap(rows, "burst", "qps", "write_reduction", title="t").get_title() == "t"


@pytest.mark.parametrize("value, label", [
    (1 / 300, "1/300"), (0.0033, "0.0033"), (0.01, "0.01"), (1 / 60, "1/60"), (2.0, "2"), (25, "25"),
    (0.123456, "0.1235"), (1 / 3, "1/3"), (2 / 3, "0.6667"), (True, "True"), ("x", "x"),
])
def test_option_label(value, label):
    assert option_label(value) == label


@pytest.mark.parametrize("value, label", [
    (1500, "1500"), (1500.0, "1500"), (1234.56, "1235"), (0.86579, "0.866"), (35.84, "35.8"), (0, "0"),
    (float("nan"), "nan"),
])
def test_value_label(value, label):
    assert value_label(value) == label


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
    ax = plots.budget_timeline(trace, objects=3, burst=5, qps=1 / 300)
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert len(lanes) == 3 and all(lane.startswith("Pod default/pod-") for lane in lanes)
    written, dropped = ax.collections[0], ax.collections[1]
    # storm: 20 pods, 50 events each; with burst 5 each pod gets 5 writes and 45 drops.
    assert len(written.get_offsets()) == 5 and len(dropped.get_offsets()) == 45
    assert "(burst=5, qps=1/300)" in ax.get_title()
    # The lane with most drops at the top.
    drops = {lane: sum(1 for r in trace if r["involved"]["name"] == lane.split("/")[1]) for lane in lanes}
    assert ax.get_ylim()[0] > ax.get_ylim()[1] and list(drops.values()) == sorted(drops.values(), reverse=True)


def reads_well(ax):
    """What a saved figure needs: a title, axis labels, and every text, tick label and legend inside the figure
    at its own size (measured after drawing, as savefig does)."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox.padded(1)

    def within(artist, box):
        assert inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1), \
            f"{artist} at {box.bounds} is outside the figure {fig.bbox.bounds}"

    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    legend = ax.get_legend()
    for artist in [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts, *([legend] if legend else [])]:
        within(artist, artist.get_window_extent(renderer))
    # Each axes (a colorbar's too) with what it drew: tick labels, labels, title, texts, legend.
    for a in fig.axes:
        within(a, a.get_tightbbox(renderer))


DUMP = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "data" / "kubectl-get-events.json"


@pytest.mark.parametrize("draw", [
    pytest.param(lambda: plots.budget_timeline(from_kubectl(DUMP), objects=6), id="budget_timeline"),
    pytest.param(lambda: plots.budget_timeline(kubelet_storm(), burst=10, qps=1 / 60), id="budget_timeline-storm"),
    pytest.param(lambda: plots.heatmap(kubevents.sweep(from_kubectl(DUMP), {"burst": [10, 200], "qps": [1 / 300, 0.1]},
                                                       progress=False), "burst", "qps"), id="heatmap"),
    pytest.param(lambda: plots.writes_over_time(from_kubectl(DUMP), log=True), id="writes_over_time"),
    pytest.param(lambda: plots.writes_over_time(generate("storm", n=20_000, seed=1), burst=5), id="short"),
])
def test_each_plot_reads_well_at_its_default_size(draw):
    """budget_timeline's object names and legend, and the heatmap's qps label, were cut off when saved."""
    reads_well(draw())


def test_bad_arguments():
    with pytest.raises(ValueError, match="bin_s"):
        plots.writes_over_time([], bin_s=0)
    with pytest.raises(ValueError, match="objects"):
        plots.budget_timeline([], objects=0)
    for plot in (plots.writes_over_time, plots.budget_timeline):
        with pytest.warns(UserWarning, match="the trace is empty"):
            assert not plot([]).has_data()
