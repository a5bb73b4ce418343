"""Traces as Arrow tables and Parquet files: the same replays as from records, and errors naming the column."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import kubevents
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kubevents import traces
from kubevents.lab import sweep


@pytest.fixture(scope="module")
def records() -> list[dict]:
    recs = list(traces.generate("mixed", 3000, seed=3))
    recs[5]["annotations"] = {"team": "a"}
    return recs


def test_a_table_replays_as_its_records(records: list[dict]) -> None:
    table = traces.to_arrow(records)
    assert table.num_rows == len(records)
    assert set(table.column_names) == set(traces.TABLE_COLUMNS)
    want = kubevents.simulate(records, per_object=True, metrics=True)
    for t in (table, pl.from_arrow(table), table.to_reader(max_chunksize=700)):
        got = kubevents.simulate(t, per_object=True, metrics=True)
        assert got.totals == want.totals
        assert got.top_objects(5) == want.top_objects(5)
        assert got.metrics == want.metrics
        assert got.object_metrics() == want.object_metrics()


def test_decisions_of_a_table_replay_are_the_records_decisions(records: list[dict]) -> None:
    table = traces.to_arrow(records)
    want = list(kubevents.simulate(records).decisions())
    assert list(kubevents.simulate(table).decisions()) == want
    # The rest of a partly iterated replay, as a table; then the iterator is done.
    d = kubevents.simulate(table).decisions()
    head = [next(d) for _ in range(10)]
    rest = pa.table(d).to_pylist()
    assert head + rest == want
    assert list(d) == []
    df = pl.DataFrame(kubevents.simulate(records).decisions())
    assert df.columns == ["index", "action", "name", "count", "message", "patch", "source_component", "source_host"]
    assert df["action"].cast(pl.String).to_list() == [r["action"] for r in want]


def test_parquet_round_trip_and_cli(records: list[dict], tmp_path) -> None:
    path = tmp_path / "t.parquet"
    assert traces.to_parquet(records, path) == len(records)
    assert traces.read_parquet(path).equals(traces.to_arrow(records))
    jsonl = tmp_path / "t.jsonl"
    traces.write_jsonl(records, jsonl)
    assert traces.to_arrow(jsonl).equals(traces.to_arrow(records))
    out = subprocess.run([sys.executable, "-m", "kubevents", "--trace", str(path), "--json"],
                         capture_output=True, text=True, check=True)
    want = subprocess.run([sys.executable, "-m", "kubevents", "--trace", str(jsonl), "--json"],
                          capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == json.loads(want.stdout)


def test_a_sweep_on_a_table_equals_the_sweep_on_records(records: list[dict]) -> None:
    grid = {"burst": [5, 25], "max_events": [3, 10]}
    want = sweep(records, grid, progress=False, workers=2)
    got = sweep(traces.to_arrow(records), grid, progress=False, workers=2)
    assert got == want
    assert got.to_polars().to_dicts() == want
    assert got.to_arrow().to_pylist() == want


def test_other_column_types_read_as_strings(records: list[dict]) -> None:
    table = traces.to_arrow(records)
    # Dictionary (pandas categoricals), large strings and string views, and timestamps of any unit.
    cast = pa.table({
        "t_ns": pa.array(table["t_ns"].to_pylist(), pa.int64()).cast(pa.timestamp("ns")),
        **{c: table[c].dictionary_encode() for c in ("involved.kind", "involved.namespace", "reason")},
        **{c: table[c].cast(pa.large_string()) for c in ("involved.name", "message")},
        "type": table["type"].cast(pa.string_view()),
    })
    plain = table.select(cast.column_names)
    assert kubevents.simulate(cast).totals == kubevents.simulate(plain).totals
    micro = pa.table({"t_ns": pa.array([1_000_000], pa.timestamp("us")), "involved.name": ["p"]})
    assert kubevents.simulate(micro).totals["events"] == 1
    assert next(iter(kubevents.simulate(micro).decisions()))["action"] == "create"


def test_bad_tables_name_the_column_and_row() -> None:
    ok = {"t_ns": pa.array([1, 2], pa.int64()), "involved.name": ["a", "b"]}
    with pytest.raises(ValueError, match=r"^involved\.nmae: unknown trace column"):
        kubevents.simulate(pa.table({"t_ns": ok["t_ns"], "involved.nmae": ["a", "b"]}))
    with pytest.raises(TypeError, match=r"^reason: expected a string column, got Int64"):
        kubevents.simulate(pa.table({**ok, "reason": [1, 2]}))
    with pytest.raises(ValueError, match=r"^t_ns: missing column"):
        kubevents.simulate(pa.table({"involved.name": ["a"]}))
    with pytest.raises(ValueError, match=r"^involved: missing columns"):
        kubevents.simulate(pa.table({"t_ns": ok["t_ns"], "reason": ["a", "b"]}))
    with pytest.raises(ValueError, match=r"^row 1: t_ns: null"):
        kubevents.simulate(pa.table({"t_ns": pa.array([1, None], pa.int64()), "involved.name": ["a", "b"]}))
    with pytest.raises(ValueError, match=r"^row 0: t_ns: out of range"):
        kubevents.simulate(pa.table({"t_ns": pa.array([2**62], pa.timestamp("s")), "involved.name": ["a"]}))
    # Null strings read as empty, as null values do in records.
    nulls = pa.table({**ok, "reason": pa.array([None, "x"], pa.string())})
    assert kubevents.simulate(nulls).totals["events"] == 2
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        kubevents.simulate(_NotAStream())


class _NotAStream:
    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return 5


def test_bad_records_are_named_when_made_into_a_table() -> None:
    with pytest.raises(TypeError, match=r"trace item 1: .*reason"):
        traces.to_arrow([{"t_ns": 1, "involved": {}}, {"t_ns": 2, "involved": {}, "reason": 5}])


def test_kubectl_dump_as_a_table() -> None:
    dump = {"items": [{
        "metadata": {"name": "e1", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"},
        "reason": "BackOff", "message": "m", "type": "Warning", "count": 3,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:02Z",
        "source": {"component": "kubelet"},
    }]}
    trace = traces.from_kubectl(dump)
    table = trace.to_arrow()
    assert table["t_ns"].to_pylist() == [r["t_ns"] for r in trace]
    assert kubevents.simulate(table).totals == kubevents.simulate(trace).totals


def test_to_records_gives_back_the_records(records: list[dict]) -> None:
    back = traces.to_records(traces.to_arrow(records))
    assert kubevents.simulate(back).totals == kubevents.simulate(records).totals
    assert back[5]["annotations"] == {"team": "a"}
    assert {k: v for k, v in records[0].items() if v} == {
        k: v for k, v in back[0].items() if k != "involved"} | {"involved": records[0]["involved"]}


def test_metrics_as_an_arrow_table(records: list[dict]) -> None:
    sim = kubevents.simulate(traces.to_arrow(records), metrics=True, per_object=True)
    overall = pa.table(sim.to_arrow())
    assert overall.to_pylist() == [sim.metrics]
    assert overall.schema.field("events").type == pa.uint64()
    assert overall.schema.field("message_share").type == pa.float64()
    objects = pl.DataFrame(sim.to_arrow(objects=True))
    assert objects.to_dicts() == sim.object_metrics()
    assert objects.columns[:3] == ["kind", "namespace", "name"]
    with pytest.raises(TypeError, match="metrics were not collected"):
        kubevents.simulate(records).to_arrow()
    with pytest.raises(TypeError, match="per-object metrics were not kept"):
        kubevents.simulate(records, metrics=True).to_arrow(objects=True)


@pytest.mark.parametrize("argv", [["--trace", "t.parquet"], ["sweep", "--trace", "t.parquet", "--grid", "burst=5"]])
def test_the_cli_without_pyarrow_says_what_to_install(argv: list[str]) -> None:
    # pyarrow hidden: `import pyarrow` raises ImportError in the child.
    code = ("import sys; sys.modules['pyarrow'] = None; from kubevents.__main__ import main; "
            f"sys.exit(main({argv!r}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("kubevents: Arrow tables and Parquet traces need pyarrow: pip install 'kubevents[lab]'")


def test_read_parquet_checks_the_columns_and_the_replay_the_values(tmp_path) -> None:
    bad_column = tmp_path / "bad_column.parquet"
    pq.write_table(pa.table({"t_ns": pa.array([1], pa.int64()), "involved.nmae": ["a"]}), bad_column)
    # The file is named: a replay of a table read from it can no longer say where it came from.
    with pytest.raises(ValueError, match=rf"^{re.escape(str(bad_column))}: involved\.nmae: unknown trace column"):
        traces.read_parquet(bad_column)
    null_time = tmp_path / "null_time.parquet"
    pq.write_table(pa.table({"t_ns": pa.array([1, None], pa.int64()), "involved.name": ["a", "b"]}), null_time)
    table = traces.read_parquet(null_time)
    with pytest.raises(ValueError, match=r"^row 1: t_ns: null"):
        kubevents.simulate(table)
    with pytest.raises(ValueError, match=r"^row 1: t_ns: null"):
        traces.to_records(table)


def test_a_scanned_parquet_file_replays_as_it_streams_and_decides_again(records: list[dict], tmp_path) -> None:
    path = tmp_path / "t.parquet"
    traces.to_parquet(records, path)
    want = kubevents.simulate(records, per_object=True, metrics=True)
    reader = traces.scan_parquet(path, batch_size=700)
    assert isinstance(reader, pa.RecordBatchReader)
    got = kubevents.simulate(reader, per_object=True, metrics=True)
    assert (got.totals, got.metrics, got.top_objects(5)) == (want.totals, want.metrics, want.top_objects(5))
    # The stream is read once; the simulation kept its batches to replay them for decisions().
    assert list(got.decisions()) == list(want.decisions())
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"t_ns": pa.array([1], pa.int64()), "involved.nmae": ["a"]}), bad)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(bad))}: involved\.nmae: unknown trace column"):
        traces.scan_parquet(bad)


def test_a_stream_from_python_is_replayed_batch_by_batch_and_its_errors_named(records: list[dict]) -> None:
    table = traces.to_arrow(records)
    pulled = []

    def batches():
        for b in table.to_batches(max_chunksize=1000):
            pulled.append(b.num_rows)
            yield b

    got = kubevents.simulate(pa.RecordBatchReader.from_batches(table.schema, batches()))
    assert got.totals == kubevents.simulate(records).totals
    assert pulled == [1000, 1000, 1000]
    # A null time in a later batch is named by its row in the whole stream.
    good = pa.table({"t_ns": pa.array([1, 2], pa.int64()), "involved.name": ["a", "b"]})
    null = pa.table({"t_ns": pa.array([3, None], pa.int64()), "involved.name": ["c", "d"]})
    stream = pa.RecordBatchReader.from_batches(good.schema, good.to_batches() + null.to_batches())
    with pytest.raises(ValueError, match=r"^row 3: t_ns: null"):
        kubevents.simulate(stream)

    def failing():
        yield good.to_batches()[0]
        raise RuntimeError("disk gone")

    with pytest.raises(ValueError, match="reading the Arrow stream failed: .*disk gone"):
        kubevents.simulate(pa.RecordBatchReader.from_batches(good.schema, failing()))
