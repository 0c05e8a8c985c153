"""The timeline SVG: well-formed, a bar per fault, a line per series."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ottla.chaos.history import Op
from ottla.chaos.timeline import render

S = 1_000_000_000


def test_the_timeline_draws_faults_throughput_and_latency() -> None:
    ops = [Op(i, "p", "produce", "ok", i * S // 100, i * S // 100 + 5_000_000, topic="t",
              partition=0, offset=i, value=str(i)) for i in range(1000)]
    faults: list[dict[str, object]] = [
        {"kind": "kill", "nodes": [2], "start_ns": 2 * S, "end_ns": 4 * S},
        {"kind": "partition", "nodes": [1, 3], "start_ns": 5 * S, "end_ns": 7 * S}]
    svg = ET.fromstring(render(ops, faults, 0, 10 * S, "a run"))
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in svg.iter(f"{ns}title")]
    assert titles == ["kill 2 2.0-4.0s", "partition 1,3 5.0-7.0s"]
    # acknowledged writes a second, and the latency's median and maximum
    assert len(list(svg.iter(f"{ns}polyline"))) == 3
