"""`python -m kubevents`."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import kubevents
from kubevents.__main__ import main
from kubevents.traces import from_kubectl, kubelet_storm

NS = 10**9
T0 = 1_700_000_000 * NS
ROWS = ["events in", "creates", "patches", "skipped by the spam filter", "aggregated", "API writes",
        "API writes saved", "objects with most API writes"]


def rec(t_s, pod, message, reason="BackOff", type_="Warning"):
    return {"t_ns": T0 + t_s * NS, "source_component": "kubelet", "source_host": "node-0",
            "involved": {"kind": "Pod", "namespace": "web", "name": pod, "uid": f"uid-{pod}", "api_version": "v1"},
            "type": type_, "reason": reason, "message": message}


# The trace of test_simulate: with burst 3 and max-events 2 it gives 4 creates, 3 patches, 1 skip, 2 aggregated.
RECORDS = [
    rec(0, "p1", "m"), rec(1, "p1", "m"), rec(2, "p2", "assigned", "Scheduled", "Normal"), rec(3, "p1", "m"),
    rec(4, "p1", "m"), rec(5, "p3", "a", "Unhealthy"), rec(6, "p3", "b", "Unhealthy"), rec(7, "p3", "c", "Unhealthy"),
]


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return path


def run(*args):
    return subprocess.run([sys.executable, "-m", "kubevents", *args], capture_output=True, text=True, timeout=120)


def row_value(out: str, label: str) -> str:
    for line in out.splitlines():
        if line.startswith(label + "  ") or line.startswith(label + " "):
            rest = line[len(label):].strip()
            if rest and (rest[0].isdigit() or rest[0] == "-"):
                return rest
    raise AssertionError(f"no row {label!r} in:\n{out}")


def test_default_run_prints_the_table():
    p = run()
    assert p.returncode == 0, p.stderr
    for row in ROWS:
        assert row in p.stdout
    assert "built-in kubelet storm" in p.stdout
    events = int(row_value(p.stdout, "events in"))
    creates, patches = int(row_value(p.stdout, "creates")), int(row_value(p.stdout, "patches"))
    skips = int(row_value(p.stdout, "skipped by the spam filter"))
    assert events == len(kubelet_storm()) == creates + patches + skips
    assert int(row_value(p.stdout, "API writes")) == creates + patches
    assert row_value(p.stdout, "API writes saved").endswith("%")


def test_json_output_parses_and_adds_up():
    p = run("--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["events"] == r["creates"] + r["patches"] + r["skipped_by_spam_filter"]
    assert r["api_writes"] == r["creates"] + r["patches"]
    assert r["api_writes_saved_percent"] == round(100 * (1 - r["api_writes"] / r["events"]), 1)
    assert 0 <= r["aggregated"] <= r["events"]
    assert len(r["top_objects"]) == 5
    writes = [o["writes"] for o in r["top_objects"]]
    assert writes == sorted(writes, reverse=True)
    for o in r["top_objects"]:
        assert o["writes"] == o["creates"] + o["patches"]
        assert o["events"] == o["writes"] + o["skips"]
    # The same numbers as the library.
    sim = kubevents.simulate(kubelet_storm(), per_object=True)
    assert r["events"] == sim.totals["events"] and r["skipped_by_spam_filter"] == sim.totals["skips"]
    assert r["top_objects"] == sim.top_objects(5)


def test_trace_file_with_options(trace_file):
    p = run("--trace", str(trace_file), "--burst", "3", "--max-events", "2", "--json", "--top", "2")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert {k: r[k] for k in ("events", "creates", "patches", "skipped_by_spam_filter", "aggregated",
                              "api_writes", "api_writes_saved_percent")} == {
        "events": 8, "creates": 4, "patches": 3, "skipped_by_spam_filter": 1, "aggregated": 2,
        "api_writes": 7, "api_writes_saved_percent": 12.5,
    }
    assert [(o["name"], o["writes"]) for o in r["top_objects"]] == [("p1", 3), ("p3", 3)]


def test_trace_file_table(trace_file):
    p = run("--trace", str(trace_file))
    assert p.returncode == 0, p.stderr
    assert f"trace: {trace_file}" in p.stdout
    assert row_value(p.stdout, "events in") == "8"
    assert row_value(p.stdout, "creates") == "5"
    assert row_value(p.stdout, "patches") == "3"
    assert row_value(p.stdout, "skipped by the spam filter") == "0"
    assert row_value(p.stdout, "API writes saved") == "0.0 %"
    assert "Pod web/p1" in p.stdout


def test_missing_file_exits_2_with_a_message(tmp_path):
    missing = tmp_path / "missing.jsonl"
    p = run("--trace", str(missing))
    assert p.returncode == 2
    assert "kubevents:" in p.stderr and "missing.jsonl" in p.stderr
    assert p.stdout == ""


def test_bad_trace_line_exits_2_naming_the_file_and_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n" + "{oops\n", encoding="utf-8")
    p = run("--trace", str(path))
    assert p.returncode == 2
    assert p.stderr == f"kubevents: {path}: line 2: key must be a string at column 2\n"


def test_a_kubectl_dump_that_is_not_json_is_named_with_its_line(tmp_path):
    path = tmp_path / "events.json"
    path.write_text('{"kind": "List",\n "items": [}\n', encoding="utf-8")
    p = run("--kubectl", str(path))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"kubevents: {path}: line 2 column 12: ") and len(p.stderr.splitlines()) == 1


def test_negative_option_exits_2(trace_file):
    p = run("--trace", str(trace_file), "--burst", "-1")
    assert p.returncode == 2
    assert "burst" in p.stderr


def test_main_in_process(trace_file, capsys):
    assert main(["--trace", str(trace_file), "--json", "--burst", "3", "--max-events", "2"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["events"], r["creates"], r["patches"], r["skipped_by_spam_filter"]) == (8, 4, 3, 1)

    assert main(["--trace", str(trace_file)]) == 0
    out = capsys.readouterr().out
    for row in ROWS:
        assert row in out


def test_main_in_process_missing_file(tmp_path, capsys):
    assert main(["--trace", str(tmp_path / "nope.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("kubevents: ") and "nope.jsonl" in captured.err


def test_main_in_process_default_trace(capsys):
    assert main(["--top", "3"]) == 0
    out = capsys.readouterr().out
    for row in ROWS:
        assert row in out
    assert row_value(out, "events in") == str(len(kubelet_storm()))


def test_huge_cache_size_does_not_abort(trace_file):
    import resource

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    p = subprocess.run([sys.executable, "-m", "kubevents", "--trace", str(trace_file), "--cache-size", str(2**40)],
                       capture_output=True, text=True, timeout=120, preexec_fn=limit_memory)
    rc = p.returncode
    # Either it works (client-go's caches do not preallocate) or it refuses with a message; never a crash.
    assert rc in (0, 2), f"exit status {rc}: {p.stderr.strip().splitlines()[:1]}"
    if rc == 2:
        assert p.stderr.startswith("kubevents: ")


def test_main_replays_a_kubectl_dump(capsys):
    sample = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "data" / "kubectl-get-events.json"
    assert main(["--kubectl", str(sample), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    want = kubevents.simulate(from_kubectl(sample), per_object=True).totals
    assert (r["events"], r["creates"], r["patches"]) == (want["events"], want["creates"], want["patches"])
    assert r["events"] > 0

    assert main(["--kubectl", str(sample)]) == 0
    assert capsys.readouterr().out.startswith(f"trace: kubectl dump {sample}\n")

    with pytest.raises(SystemExit):
        main(["--kubectl", str(sample), "--trace", str(sample)])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    ({"source": "kubelet"}, "kubevents: items[0].source: expected an object, got str"),
    ({"message": 42}, "kubevents: items[0].message: expected a str, got int"),
    ({"count": 2**31 - 1}, "kubevents: items[0].count: 2147483647 is above the limit of 1,000,000 occurrences"),
])
@pytest.mark.parametrize("command", [[], ["sweep", "--grid", "burst=5,25", "--no-progress"]], ids=["replay", "sweep"])
def test_a_bad_kubectl_dump_exits_2_with_one_line(tmp_path, change, message, command):
    """A field of the wrong type was an AttributeError with a traceback; a huge count took all the memory."""
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "web"},
             "involvedObject": {"kind": "Pod", "namespace": "web", "name": "p", "apiVersion": "v1"},
             "reason": "BackOff", "message": "m", "source": {"component": "kubelet"}, "type": "Warning",
             "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T01:00:00Z", "count": 3}
    event.update(change)
    dump = tmp_path / "events.json"
    dump.write_text(json.dumps({"kind": "List", "items": [event]}), encoding="utf-8")
    p = run(*command, "--kubectl", str(dump))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(message) and len(p.stderr.splitlines()) == 1, p.stderr


def run_main(capsys, *args):
    """main() in this process: the exit status (argparse's usage errors included), stdout and stderr."""
    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = e.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("args, message", [
    (["--top", "-3"], "argument --top: must be >= 0, got -3"),
    (["--top", "many"], "argument --top: 'many' is not an int"),
    (["--qps", "1/0"], "argument --qps: '1/0' is not a number (or a fraction such as 1/300)"),
    (["--qps", "fast"], "argument --qps: 'fast' is not a number (or a fraction such as 1/300)"),
    (["--qps", "1e400"], "argument --qps: '1e400' is too large"),
])
def test_a_bad_option_value_is_a_usage_error(capsys, args, message):
    """--top -3 was a ValueError with a traceback from the report, after the replay."""
    rc, out, err = run_main(capsys, *args)
    assert rc == 2 and out == ""
    assert err.startswith("usage: python -m kubevents") and err.rstrip().endswith(message), err


def test_a_huge_top_lists_every_object(capsys):
    rc, out, _ = run_main(capsys, "--top", str(10**20), "--json")
    assert rc == 0
    sim = kubevents.simulate(kubelet_storm(), per_object=True)
    assert json.loads(out)["top_objects"] == sim.top_objects(sim.totals["events"])


def test_qps_takes_a_fraction_as_its_help_and_sweep_write_it(capsys, trace_file):
    """The help says "default 1/300" and ``sweep --grid qps=1/300`` took it, but --qps refused it."""
    from kubevents._sweep_cli import parse_grid

    rc, out, _ = run_main(capsys, "--qps", "1/300", "--json")
    assert rc == 0 and json.loads(out) == json.loads(run("--json").stdout)
    rc, out, _ = run_main(capsys, "--trace", str(trace_file), "--burst", "1", "--qps", "1/2", "--json")
    assert rc == 0
    want = kubevents.simulate(RECORDS, burst=1, qps=0.5).totals
    assert json.loads(out)["skipped_by_spam_filter"] == want["skips"] > 0
    # One parser for both commands.
    assert parse_grid(["qps=1/300,0.01"])["qps"] == [1 / 300, 0.01]
    assert "(default 1/300)" in run_main(capsys, "--help")[1]


def test_help_names_the_sweep_command(capsys):
    rc, out, _ = run_main(capsys, "--help")
    assert rc == 0
    commands = out[out.index("commands:"):]
    assert "sweep" in commands and "python -m kubevents sweep --help" in commands


@pytest.fixture(scope="module")
def many_objects(tmp_path_factory):
    """A trace whose report is far larger than a pipe's buffer (64 KiB)."""
    from kubevents.traces import generate, write_jsonl

    path = tmp_path_factory.mktemp("pipe") / "unique.jsonl"
    write_jsonl(generate("unique", n=4000, seed=1), path)
    return path


@pytest.mark.parametrize("command", [
    ["--json", "--top", "4000"],
    ["--top", "4000"],
    # 10,000 replays of the 8-record trace: a table of 140 KB.
    ["sweep", "--grid", "burst=" + ",".join(map(str, range(1, 10_001))), "--metrics", "writes", "--no-progress"],
], ids=["json", "table", "sweep"])
def test_a_reader_that_stops_early_ends_the_command_quietly(many_objects, trace_file, command):
    """`python -m kubevents --json | head` ended in a BrokenPipeError traceback."""
    trace = trace_file if command[0] == "sweep" else many_objects
    p = subprocess.Popen([sys.executable, "-m", "kubevents", *command, "--trace", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline()
    p.stdout.close()  # as head does once it has its lines
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1
    assert err == ""


@pytest.mark.parametrize("make, args, message", [
    pytest.param(lambda d: d, lambda d: ["--trace", str(d)], "{d}: no Parquet files (*.parquet) under it", id="trace-dir"),
    pytest.param(lambda d: d, lambda d: ["--kubectl", str(d)], "Is a directory: '{d}'", id="kubectl-dir"),
    pytest.param(lambda d: (d / "latin1.jsonl").write_bytes(b'{"t_ns": 1, "involved": {}, "message": "\xe9"}\n'),
                 lambda d: ["--trace", str(d / "latin1.jsonl")], "{d}/latin1.jsonl: line 1: ", id="trace-latin1"),
    pytest.param(lambda d: (d / "latin1.json").write_bytes(b'{"items": ["\xe9"]}'),
                 lambda d: ["--kubectl", str(d / "latin1.json")], "{d}/latin1.json: not UTF-8 text",
                 id="kubectl-latin1"),
    pytest.param(lambda d: (d / "t.parquet").write_text("not parquet"), lambda d: ["--trace", str(d / "t.parquet")],
                 "{d}/t.parquet", id="not-parquet"),
    pytest.param(lambda d: d, lambda d: ["--trace", str(d / "missing.parquet")],
                 "No such file or directory: '{d}/missing.parquet'", id="missing-parquet"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "burst=1", "--trace", str(d)],
                 "{d}: no Parquet files (*.parquet) under it", id="sweep-trace-dir"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "qps=1/300,", "--no-progress"],
                 "--grid qps: '' is not a number (or a fraction such as 1/300)", id="grid-empty-value"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "qps=1e400"], "--grid qps: '1e400' is too large",
                 id="grid-huge-qps"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "=1"], "unknown option ''", id="grid-no-option"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "burst=1,x"], "--grid burst: 'x' is not an int",
                 id="grid-not-int"),
    pytest.param(lambda d: d, lambda d: ["sweep", "--grid", "burst=1", "--csv", str(d)], "--csv {d}: Is a directory",
                 id="csv-dir"),
])
def test_bad_input_is_one_line_without_a_traceback(tmp_path, capsys, make, args, message):
    make(tmp_path)
    rc, out, err = run_main(capsys, *args(tmp_path))
    assert rc == 2 and out == ""
    assert err.startswith("kubevents: ") and len(err.splitlines()) == 1, err
    assert message.format(d=tmp_path) in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_trace_is_one_line(trace_file, capsys):
    trace_file.chmod(0)
    rc, _, err = run_main(capsys, "--trace", str(trace_file))
    assert rc == 2 and err.startswith(f"kubevents: {trace_file}: Permission denied")


def test_ctrl_c_ends_the_command_without_a_traceback(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(kubevents, "simulate", interrupted)
    assert run_main(capsys, "--json") == (130, "", "kubevents: interrupted\n")
