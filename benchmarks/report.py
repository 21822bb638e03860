"""The results table, the bars, and the JSON document."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.scenarios import Measurement

SYSTEMS = ("ours", "mock", "kfake")  # kfake: the share-group rows only (issue 28)


@dataclass
class Row:
    key: str
    label: str
    unit: str
    measured: dict[str, Measurement] = field(default_factory=dict)

    def value(self, system: str) -> float | None:
        found = self.measured.get(system)
        return None if found is None else found.value

    @property
    def ratio(self) -> float | None:
        return self.ratio_over("mock")

    def ratio_over(self, system: str) -> float | None:
        ours, theirs = self.value("ours"), self.value(system)
        return ours / theirs if ours is not None and theirs else None


@dataclass
class Bar:
    name: str
    value: float | None
    target: str
    passed: bool | None  # None: not measured in this run
    note: str = ""


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("heartbeats/s", "B/member", "records/s"):
        return f"{value:,.0f}"
    if unit == "MB":
        return f"{value:,.1f}"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def table(rows: list[Row]) -> str:
    width = max(len(r.label) for r in rows) + 2
    lines = [f"{'scenario':<{width}}{'system':<8}{'value':>14}  {'unit':<14}{'ours/mock':>10}  note"]
    if any("kfake" in r.measured for r in rows):
        lines.append(f"{'':<{width}}{'':<8}{'':>14}  {'':<14}{'':>10}  (a kfake line gives ours/kfake)")
    lines.append("-" * (width + 70))
    for row in rows:
        for system in SYSTEMS:
            measured = row.measured.get(system)
            if measured is None:
                continue
            label = row.label if system == "ours" else ""
            ratio = ""
            if system == "ours":
                ratio = "n/a" if row.ratio is None else f"{row.ratio:.2f}"
            elif system == "kfake":  # its line carries ours/kfake
                over = row.ratio_over("kfake")
                ratio = "n/a" if over is None else f"{over:.2f}"
            note = measured.note
            lines.append(
                f"{label:<{width}}{system:<8}{_format(measured.value, row.unit):>14}  {row.unit:<14}{ratio:>10}  {note}"
            )
    return "\n".join(lines)


def bars_text(bars: list[Bar]) -> str:
    lines = ["bars (printed, never asserted):"]
    for bar in bars:
        verdict = "n/a " if bar.passed is None else ("PASS" if bar.passed else "FAIL")
        value = "" if bar.value is None else f" ({bar.value:,.2f})"
        note = f"  [{bar.note}]" if bar.note else ""
        lines.append(f"  {verdict}  {bar.name}: {bar.target}{value}{note}")
    return "\n".join(lines)


# The classic figures (every row before KIP-848 came) and which way is better: +1 higher, -1 lower.
CLASSIC_DIRECTION = {
    "startup": -1,
    "heartbeat": 1,
    "heartbeat_scale": 1,
    "rss_idle": -1,
    "rss_members": -1,
    "bytes_per_member": -1,
}


def classic_direction(key: str) -> int | None:
    return -1 if key.startswith("formation_") else CLASSIC_DIRECTION.get(key)


@dataclass
class Change:
    key: str
    label: str
    unit: str
    before: float
    now: float

    @property
    def better(self) -> float:
        """The change as a share, positive when the figure got better (+0.05: 5% better)."""
        direction = classic_direction(self.key) or 1
        return (self.now / self.before - 1) * direction if self.before else 0.0


def baseline_changes(rows: list[Row], baseline: dict[str, Any]) -> list[Change]:
    """Ours' classic figures against an earlier --json document's (keys measured in both only)."""
    before = baseline.get("results", {})
    changes = []
    for row in rows:
        if classic_direction(row.key) is None or row.key not in before:
            continue
        old = (before[row.key].get("ours") or {}).get("value")
        now = row.value("ours")
        if old is not None and now is not None:
            changes.append(Change(row.key, row.label, row.unit, float(old), now))
    return changes


def baseline_text(changes: list[Change], source: str) -> str:
    lines = [f"classic figures of ours against {source} (+ is better):"]
    for c in changes:
        before, now = _format(c.before, c.unit), _format(c.now, c.unit)
        lines.append(f"  {c.label}: {before} -> {now} {c.unit} ({c.better:+.1%})")
    return "\n".join(lines)


def document(meta: dict[str, Any], rows: list[Row], bars: list[Bar]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for row in rows:
        entry: dict[str, Any] = {"label": row.label, "unit": row.unit, "ratio_ours_over_mock": row.ratio}
        if "kfake" in row.measured:
            entry["ratio_ours_over_kfake"] = row.ratio_over("kfake")
        for system, m in row.measured.items():
            entry[system] = {"value": m.value, "note": m.note, "flagged": m.flagged, "details": m.details}
        results[row.key] = entry
    return {
        "meta": meta,
        "results": results,
        "bars": [{"bar": b.name, "target": b.target, "value": b.value, "pass": b.passed, "note": b.note} for b in bars],
        "flagged": [f"{row.key} {system}: {m.note}" for row in rows for system, m in row.measured.items() if m.flagged],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
