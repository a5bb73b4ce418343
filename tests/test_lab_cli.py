"""python -m kubevents sweep."""

from __future__ import annotations

import csv
import pathlib
import subprocess
import sys

import pytest

import kubevents
from kubevents.__main__ import main
from kubevents._sweep_cli import parse_grid
from kubevents.traces import from_kubectl, generate, write_jsonl

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "data" / "kubectl-get-events.json"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "mixed.jsonl"
    write_jsonl(generate("mixed", n=2000, seed=1), path)
    return path


def test_sweep_prints_a_row_per_combination_and_writes_csv(trace_file, tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    rc = main(["sweep", "--trace", str(trace_file), "--grid", "burst=10,25,50", "--grid", "qps=0.0033,0.01",
               "--csv", str(out_csv), "--no-progress"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["burst", "qps", "writes", "write_reduction"]
    assert len(lines) == 1 + 6
    rows = list(csv.DictReader(out_csv.open()))
    expected = kubevents.sweep(trace_file, {"burst": [10, 25, 50], "qps": [0.0033, 0.01]}, progress=False)
    assert len(rows) == 6
    for got, want in zip(rows, expected):
        assert {k: str(v) for k, v in want.items()} == got
    assert lines[1].split()[:3] == ["10", "0.0033", str(expected[0]["writes"])]


def test_sweep_over_a_kubectl_dump_with_chosen_metrics(capsys):
    rc = main(["sweep", "--kubectl", str(SAMPLE), "--grid", "burst=25,100", "--grid", "qps=1/300",
               "--metrics", "writes,unreported", "--no-progress"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["burst", "qps", "writes", "unreported"]
    want = kubevents.sweep(from_kubectl(SAMPLE), {"burst": [25, 100], "qps": [1 / 300]}, progress=False)
    assert [line.split()[2] for line in lines[1:]] == [str(r["writes"]) for r in want]


def test_parse_grid():
    assert parse_grid(["burst=1,2", "qps=1/300, 0.5", "max-events=3"]) == {
        "burst": [1, 2], "qps": [1 / 300, 0.5], "max_events": [3]}


@pytest.mark.parametrize("args, message", [
    (["--grid", "brust=1"], "unknown option 'brust'"),
    (["--grid", "burst"], "expected OPTION=V1,V2"),
    (["--grid", "burst=1.5"], "'1.5' is not an int"),
    (["--grid", "qps=fast"], "is not a number"),
    (["--grid", "burst=1", "--grid", "burst=2"], "given twice"),
    (["--grid", "burst=1", "--metrics", "writes,nope"], "unknown metric 'nope'"),
    (["--grid", "burst=1", "--trace", "/nonexistent.jsonl"], "No such file"),
])
def test_bad_arguments_exit_2_with_a_message(args, message, capsys):
    assert main(["sweep", *args, "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_the_default_command_is_unchanged():
    out = subprocess.run([sys.executable, "-m", "kubevents", "--json"], capture_output=True, text=True, check=True)
    assert '"api_writes"' in out.stdout
    help_text = subprocess.run([sys.executable, "-m", "kubevents", "sweep", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "--grid OPTION=V1,V2,..." in help_text


def test_an_unwritable_csv_fails_before_the_sweep(tmp_path, capsys, monkeypatch):
    """--csv /nonexistent/x.csv failed with a traceback after the whole sweep."""
    def no_sweep(*args, **kwargs):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(kubevents, "sweep", no_sweep)
    missing = tmp_path / "no-such-dir" / "x.csv"
    assert main(["sweep", "--grid", "burst=1,2", "--csv", str(missing), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"kubevents: --csv {missing}: No such file or directory\n"


def test_checking_the_csv_path_leaves_no_file_and_keeps_an_existing_one(trace_file, tmp_path, capsys):
    from kubevents._sweep_cli import _check_writable

    new = tmp_path / "new.csv"
    _check_writable(str(new))
    assert not new.exists()
    old = tmp_path / "old.csv"
    old.write_text("kept\n")
    _check_writable(str(old))
    assert old.read_text() == "kept\n"
    # A sweep that fails on its trace leaves the existing file as it was.
    assert main(["sweep", "--grid", "burst=1", "--csv", str(old), "--trace", str(tmp_path / "nope.jsonl")]) == 2
    assert old.read_text() == "kept\n"


def test_the_table_shows_rates_as_people_write_them(trace_file, capsys):
    rc = main(["sweep", "--trace", str(trace_file), "--grid", "qps=1/300,0.0033,1/60,2", "--metrics", "writes",
               "--no-progress"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["qps", "1/300", "0.0033", "1/60", "2"]
