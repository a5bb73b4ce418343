"""Makes ``capture.jsonl``, the capture that ``notebooks/04-capture.ipynb`` replays: ten minutes of a node in
trouble (``kubevents.traces.kubelet_storm``), recorded by its components through a ``kubevents.Broadcaster``
with client-go's defaults into the fake API server of the tests, and captured from that server by
``kubevents.capture`` as ``python -m kubevents capture`` would from a cluster.

Run it from the repository's root (it needs the test extra: ``pip install -e '.[test]'``)::

    python notebooks/data/capture_sample.py

The recording runs on a FakeClock set to each occurrence's time, so the events carry the storm's times and the
capture takes seconds. Each component records through its own recorder, as on a node. The file is
reproducible: the same storm, the same decisions, the same records.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from pytest_httpserver import HTTPServer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

import kubernetes.client  # noqa: E402
from fake_apiserver import FakeCluster  # noqa: E402

import kubevents  # noqa: E402
from kubevents.capture import Capture  # noqa: E402
from kubevents.sinks import CoreV1Sink  # noqa: E402
from kubevents.traces import kubelet_storm  # noqa: E402

MINUTES = 10
OUT = HERE / "capture.jsonl"


def main() -> None:
    storm = kubelet_storm(seed=7, minutes=MINUTES)
    server = HTTPServer(threaded=True)
    server.start()
    cluster = FakeCluster(server)
    cluster.namespaces |= {r["involved"]["namespace"] for r in storm}
    stop = threading.Event()
    capture = Capture(OUT, api_client=cluster.api_client(), stop=stop)
    capturing = threading.Thread(target=capture.run)
    capturing.start()
    try:
        assert capture.watching.wait(60), "the capture did not start"
        clock = kubevents.FakeClock(storm[0]["t_ns"] / 1e9)
        with cluster.api_client() as client:
            broadcaster = kubevents.Broadcaster(clock=clock)
            broadcaster.start_recording_to_sink(CoreV1Sink(kubernetes.client.CoreV1Api(client)))
            recorders = {}
            now = 0.0
            for r in storm:
                # Two occurrences of one object at the same instant would make two events of the same name: a
                # microsecond apart, as a real clock has them.
                now = max(r["t_ns"] / 1e9, now + 1e-6)
                clock.set(now)
                source = (r["source_component"], r["source_host"] or None)
                if source not in recorders:
                    recorders[source] = broadcaster.new_recorder(*source)
                i = r["involved"]
                ref = {"kind": i["kind"], "namespace": i["namespace"], "name": i["name"], "uid": i["uid"],
                       "apiVersion": i["api_version"]}
                recorders[source].event(ref, r["type"], r["reason"], r["message"], field_path=i["field_path"] or None)
                assert broadcaster.wait_idle(60)
            stats = broadcaster.shutdown(timeout=60)
        counted = sum(e.get("count", 1) for e in cluster.core_v1.events.values())
        while capture.stats.occurrences < counted and capturing.is_alive():
            capturing.join(0.1)
    finally:
        stop.set()
        capturing.join(60)
        cluster.close()
        server.clear()
        server.stop()
    print(f"{len(storm)} occurrences recorded; {stats['created']} created, {stats['patched']} patched, "
          f"{stats['skipped']} skipped by the spam filter; captured {capture.stats.summary()} to {OUT}")


if __name__ == "__main__":
    main()
