"""The timeline of a run as a small SVG written here (no plotting dependency): the faults
as bars, the throughput of acknowledged writes and of polls, and the produce latency
(median and maximum) per second, on one time axis from the workload's start."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from html import escape

from ottla.chaos.history import Op

WIDTH, LEFT, RIGHT = 960, 90, 20
COLOURS = {"kill": "#d62728", "leader-kill": "#8c1c13", "pause": "#9467bd",
           "cut": "#ff7f0e", "partition": "#e377c2", "delay": "#17becf",
           "slow": "#bcbd22", "disk-full": "#7f7f7f", "clock-skew": "#1f77b4"}


def per_second(ops: Iterable[Op], start_ns: int) -> tuple[dict[int, int], dict[int, int],
                                                          dict[int, list[float]]]:
    """Acknowledged produces, polls, and produce latencies (ms), by second."""
    acked: dict[int, int] = defaultdict(int)
    polled: dict[int, int] = defaultdict(int)
    latency: dict[int, list[float]] = defaultdict(list)
    for op in ops:
        second = (op.complete_ns - start_ns) // 1_000_000_000
        if op.kind == "produce" and op.outcome == "ok":
            acked[second] += 1
            latency[second].append((op.complete_ns - op.invoke_ns) / 1e6)
        elif op.kind == "poll":
            polled[second] += 1
    return acked, polled, latency


def _polyline(points: Sequence[tuple[float, float]], colour: str) -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>'


def render(ops: Sequence[Op], faults: Sequence[dict[str, object]], start_ns: int,
           end_ns: int, title: str) -> str:
    seconds = max(1.0, (end_ns - start_ns) / 1e9)
    scale = (WIDTH - LEFT - RIGHT) / seconds

    def x(t: float) -> float:
        return LEFT + t * scale

    acked, polled, latency = per_second((op for op in ops if op.complete_ns <= end_ns),
                                        start_ns)
    out: list[str] = []
    y = 30
    out.append(f'<text x="{LEFT}" y="18" font-size="14">{escape(title)}</text>')
    # faults: one row per kind
    kinds = sorted({str(f["kind"]) for f in faults})
    for row, kind in enumerate(kinds):
        top = y + row * 16
        out.append(f'<text x="4" y="{top + 11}" font-size="11">{kind}</text>')
        for f in faults:
            if f["kind"] != kind:
                continue
            a = (int(str(f["start_ns"])) - start_ns) / 1e9
            b = (int(str(f["end_ns"])) - start_ns) / 1e9
            nodes = ",".join(str(n) for n in f["nodes"])  # type: ignore[attr-defined]
            out.append(f'<rect x="{x(a):.1f}" y="{top}" width="{max(1.0, (b - a) * scale):.1f}"'
                       f' height="12" fill="{COLOURS.get(kind, "#777")}"><title>{kind} '
                       f'{nodes} {a:.1f}-{b:.1f}s</title></rect>')
    y += max(1, len(kinds)) * 16 + 20
    span = range(int(seconds))  # whole seconds: a last partial one would read low
    for label, series, colour in (("acked/s", acked, "#1f77b4"), ("polled/s", polled,
                                                                   "#2ca02c")):
        if series:
            y = _panel(out, y, label, {s: [float(series.get(s, 0))] for s in span},
                       seconds, x, colour, max)
    _panel(out, y, "latency ms (median, max)", latency, seconds, x, "#555", _median,
           extra=("#d62728", max))
    height = y + 130
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
            + "".join(out) + "</svg>\n")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


Reduce = Callable[[list[float]], float]


def _panel(out: list[str], y: int, label: str, series: dict[int, list[float]],
           seconds: float, x: Callable[[float], float], colour: str, reduce: Reduce,
           extra: tuple[str, Reduce] | None = None) -> int:
    """A panel 100 px high of ``reduce(series[second])``; returns where the next starts."""
    height = 100
    lines = [(colour, reduce)] + ([extra] if extra else [])
    values = {s: [f(v) for _, f in lines] for s, v in series.items() if v and s < seconds}
    top = max((max(v) for v in values.values()), default=1.0) or 1.0
    out.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - RIGHT}" height="{height}" '
               f'fill="none" stroke="#ccc"/>')
    out.append(f'<text x="4" y="{y + 12}" font-size="11">{escape(label)}</text>')
    out.append(f'<text x="4" y="{y + 26}" font-size="10">max {top:.0f}</text>')
    for i, (line_colour, _) in enumerate(lines):
        points = [(x(s + 0.5), y + height - values[s][i] / top * height)
                  for s in range(int(seconds) + 1) if s in values]
        if points:
            out.append(_polyline(points, line_colour))
    for t in range(0, int(seconds) + 1, 10):
        out.append(f'<text x="{x(t):.1f}" y="{y + height + 11}" font-size="9">{t}s</text>')
    return y + height + 20
