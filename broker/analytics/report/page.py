"""The report's page: one self-contained HTML document, its plots embedded as base64 PNGs and its style inline.

It opens from a mail attachment or a CI artifact with no network and no scripts.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from broker.analytics.report.disturbances import disturbances_section
from broker.analytics.report.gather import FORMATION, ReportData
from broker.analytics.report.plots import PLOTS
from broker.analytics.report.share import share_section
from broker.analytics.report.style import CAUSE_COLORS, OTHER, PROTOCOLS, counts_phrase, duration

BAD_KINDS_HINT = "lines the job could not use; the examples give file:line"

CSS = """
:root { --ink: #1f2328; --muted: #656d76; --line: #d8dee4; --bg: #f6f8fa; --card: #ffffff;
        --accent: #3b6fb6; --warn-bg: #fff8c5; --warn: #9a6700; --bad: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 650; }
header p { margin: 0; color: var(--muted); }
h2 { font-size: 18px; margin: 0 0 12px; font-weight: 620; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 20px 22px;
          margin-top: 20px; overflow-x: auto; }
section > p.note { color: var(--muted); margin: -6px 0 12px; font-size: 13px; }
.kpis { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin-top: 20px; }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.kpi .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.kpi .value { font-size: 22px; font-weight: 650; margin-top: 2px; font-variant-numeric: tabular-nums; }
.kpi .sub { color: var(--muted); font-size: 12px; }
.banner { margin-top: 18px; padding: 12px 16px; border-radius: 10px; background: var(--warn-bg);
          border: 1px solid #d4a72c; color: var(--warn); }
.banner.ok { background: #dafbe1; border-color: #4ac26b; color: #116329; }
img.plot { display: block; width: 100%; height: auto; border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .03em;
     background: #fafbfc; }
td.num, th.num { text-align: right; white-space: nowrap; }
td code, .nowrap { white-space: nowrap; }
/* The wide tables wrap their headers and names instead of hiding columns behind a scrollbar (issue 26). */
th.num { white-space: normal; }
#groups td code, #slowest td code { white-space: normal; overflow-wrap: anywhere; }
tr.bad td { background: #fff1f0; }
tr.bad td.kind { color: var(--bad); font-weight: 600; }
code, pre { font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
pre.example { margin: 0 0 4px; padding: 4px 8px; background: var(--bg); border-radius: 6px; white-space: pre-wrap;
              word-break: break-all; }
.bar { display: inline-block; height: 10px; background: var(--accent); border-radius: 3px; vertical-align: middle;
       margin-right: 8px; opacity: .8; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; }
.muted { color: var(--muted); }
.tag { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; background: #eef2f7; }
.tag.eager { background: #e3ecf8; color: #2b5797; }
.tag.cooperative { background: #fbeadf; color: #a4501b; }
.tag.consumer { background: #def3f0; color: #1d6f65; }
footer { margin-top: 28px; color: var(--muted); font-size: 12px; text-align: center; }
@media (max-width: 800px) { .grid2, .kpis { grid-template-columns: 1fr 1fr; } main { padding: 16px; } }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _datetime(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _when(ms: int | None, *, short: bool = False) -> str:
    """A UTC time; ``short``: without the year and zone, for a table whose header says UTC."""
    if ms is None:
        return "-"
    return _datetime(ms).strftime("%m-%d %H:%M:%S" if short else "%Y-%m-%d %H:%M:%S UTC")


def _times(restarts: int) -> str:
    return "restarted once" if restarts == 1 else f"restarted {restarts} times"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _kpi(label: str, value: str, sub: str = "") -> str:
    extra = f'<div class="sub">{_e(sub)}</div>' if sub else ""
    return f'<div class="kpi"><div class="label">{_e(label)}</div><div class="value">{_e(value)}</div>{extra}</div>'


def _table_html(
    headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[str]], row_class: Sequence[str] = ()
) -> str:
    """``headers``: (title, numeric); cells are already HTML."""
    head = "".join(f'<th class="num">{_e(h)}</th>' if num else f"<th>{_e(h)}</th>" for h, num in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>"
            for cell, (_, num) in zip(row, headers, strict=True)
        )
        css = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        body.append(f"<tr{css}>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">nothing</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _protocol_tag(value: str | None) -> str:
    if not value:
        return '<span class="muted">-</span>'
    return f'<span class="tag {_e(value)}">{_e(value)}</span>'


def _rebalances(data: ReportData) -> int:
    """Every episode: the sum of the series (``data.counts``), or the summary's count without the rebalances table."""
    return sum(data.counts.values()) if data.counts else int((data.overall or {}).get("rebalances") or 0)


def _bad_lines(data: ReportData) -> int:
    return sum(int(r["count"] or 0) for r in data.input_rows if r["kind"] not in ("lines", "parsed"))


def _ps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def document(data: ReportData, images: dict[str, bytes]) -> str:
    """The whole HTML document."""
    o = data.overall or {}
    steady = data.steady if data.steady is not None else o  # the statistics after group formation
    formed = data.formation or {}
    lines = next((int(r["count"]) for r in data.input_rows if r["kind"] == "lines"), 0)
    parsed = next((int(r["count"]) for r in data.input_rows if r["kind"] == "parsed"), 0)
    bad = _bad_lines(data)
    span = (
        f"{_when(data.first_ms)} to {_when(data.last_ms)} ({duration((data.last_ms or 0) - (data.first_ms or 0))})"
        if data.first_ms is not None
        else "no rebalances"
    )
    sources = ", ".join(data.inputs) if data.inputs else str(data.out_dir)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Rebalance report</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<header><h1>Consumer-group rebalances</h1>",
        f"<p>{_e(span)} &middot; {data.runs} broker run(s) &middot; {data.group_count:,} groups</p>",
        f'<p class="muted">From {_e(_short(sources, 300))}</p></header>',
    ]
    if bad:
        kinds = ", ".join(
            f"{int(r['count']):,} {r['kind']}"
            for r in data.input_rows
            if r["kind"] not in ("lines", "parsed") and r["count"]
        )
        parts.append(
            f'<div class="banner"><strong>{bad:,} of {lines:,} lines were not used</strong> ({_e(kinds)}): '
            f'see <a href="#input">Input</a> for examples with file and line.</div>'
        )
    elif data.input_rows:
        parts.append(f'<div class="banner ok">All {lines:,} lines were read and used.</div>')

    parts.append('<div class="kpis">')
    parts += [
        _kpi("Rebalances", _count(_rebalances(data)), counts_phrase(data.counts)),
        _kpi("Duration p50", duration(steady.get("rebalance_ms_p50")), "ended Stable, after the group's formation"),
        _kpi(
            "Duration p95 / p99",
            f"{duration(steady.get('rebalance_ms_p95'))} / {duration(steady.get('rebalance_ms_p99'))}",
            f"max {duration(steady.get('rebalance_ms_max'))}",
        ),
        _kpi("Detection p50", duration(o.get("detection_ms_p50")), f"p99 {duration(o.get('detection_ms_p99'))}"),
        _kpi("Expired members", _count(o.get("expirations")), "session timeouts"),
        _kpi(
            "Unowned partition-seconds",
            _count(steady.get("unowned_partition_seconds")),
            # with the formations' share and the total, summary.json's unowned_partition_seconds
            f"after formation (p95 {steady.get('unowned_ps_p95') or 0:,.1f} per rebalance); "
            f"+{_count(formed.get('unowned_partition_seconds') or 0)} in formations, "
            f"{_count((steady.get('unowned_partition_seconds') or 0) + (formed.get('unowned_partition_seconds') or 0))}"
            " in all",
        ),
        _kpi(
            "Group formations",
            _count(data.counts.get(FORMATION, 0)),
            f"p50 {duration(formed.get('rebalance_ms_p50'))}, "
            f"{_count(formed.get('unowned_partition_seconds'))} unowned p-s",
        ),
        _kpi("Input lines", _count(lines), f"{parsed:,} used, {bad:,} not"),
    ]
    parts.append("</div>")

    notes = {
        "rebalance_durations": "From the rebalance's start to the group's next stable generation, eager against "
        "cooperative against the consumer protocol (KIP-848: from the group epoch's bump to every member "
        "reconciled); a log scale, since restarts and dead members stretch a few to minutes. Group formations "
        "(from Empty: a classic group waits group.initial.rebalance.delay.ms, 3 s by default) are a series of "
        "their own, and the p50 and p99 lines are those of the rebalances after formation.",
        "detection_times": "For members evicted by their session timeout: the silence the coordinator waited "
        "through. Spikes sit at the groups' session timeouts.",
        "unowned_over_time": "Partitions that nobody consumed, averaged over each time bucket (stacked by "
        "protocol, group formations apart; each rebalance's partition-seconds spread over the time it lasted), "
        "and how many rebalances started in it.",
        "generations_timeline": "The groups with the most rebalances: their generation over time, one dot per "
        "rebalance coloured by cause; the line starts again at a broker restart.",
    }
    for name, title in PLOTS.items():
        encoded = base64.b64encode(images[name]).decode("ascii")
        alt = f"{title}: {counts_phrase(data.counts)}" if name == "rebalance_durations" and data.counts else title
        parts.append(
            f'<section id="{name}"><h2>{_e(title)}</h2><p class="note">{_e(notes[name])}</p>'
            f'<img class="plot" alt="{_e(alt)}" src="data:image/png;base64,{encoded}"></section>'
        )
        if name == "rebalance_durations":
            parts.append(_summary_section(data))
        if name == "generations_timeline":
            parts.append(disturbances_section(data.disturbances))

    parts.append(share_section(data.share))
    parts.append(_causes_section(data))
    parts.append(_groups_section(data))
    parts.append(_slowest_section(data))
    parts.append(_input_section(data))
    generated = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<footer>group-broker analyze &middot; rendered {generated} &middot; {_e(data.out_dir)}</footer>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _summary_section(data: ReportData) -> str:
    o = data.overall or {}
    steady = data.steady if data.steady is not None else o
    formed = data.formation or {}
    rows = [
        (
            _e(label),
            *(
                duration(source.get(f"{prefix}_{p}")) if unit == "ms" else _ps(source.get(f"{prefix}_{p}"))
                for p in ("p50", "p95", "p99", "max")
            ),
        )
        for label, source, prefix, unit in (
            ("Rebalance duration, after formation", steady, "rebalance_ms", "ms"),
            ("Detection time", o, "detection_ms", "ms"),
            ("Unowned partition-seconds per rebalance, after formation", steady, "unowned_ps", "ps"),
            ("Group formation: duration", formed, "rebalance_ms", "ms"),
            ("Group formation: unowned partition-seconds", formed, "unowned_ps", "ps"),
        )
    ]
    percentiles = _table_html([("", False), ("p50", True), ("p95", True), ("p99", True), ("max", True)], rows)
    percentiles += _protocols_table(data)
    outcome_rows = [(_e(k), _count(v)) for k, v in sorted(data.outcomes.items(), key=lambda kv: -kv[1])]
    end_rows = [(_e(k), _count(v)) for k, v in sorted(data.member_ends.items(), key=lambda kv: -kv[1])]
    return (
        '<section id="summary"><h2>Summary</h2>'
        f"{percentiles}"
        '<div class="grid2" style="margin-top:18px">'
        f"<div><h2>Outcomes</h2>{_table_html([('outcome', False), ('rebalances', True)], outcome_rows)}</div>"
        f"<div><h2>How members ended</h2>{_table_html([('end', False), ('members', True)], end_rows)}</div>"
        "</div></section>"
    )


def _protocols_table(data: ReportData) -> str:
    """Per protocol after formation, the formations as a row of their own, and the total: the counts are
    ``data.counts``, the card's and the legend's."""
    order = {name: i for i, name in enumerate((*PROTOCOLS, "none"))}
    listed = sorted(data.by_protocol, key=lambda r: (order.get(str(r["protocol"]), len(order)), str(r["protocol"])))
    if data.formation and data.formation.get("rebalances"):
        listed.append({**data.formation, "protocol": None})
    rows = [
        (
            _protocol_tag(r["protocol"]) if r["protocol"] else "group formation (from Empty)",
            _count(data.counts.get(str(r["protocol"] or FORMATION), 0)),
            duration(r.get("rebalance_ms_p50")),
            duration(r.get("rebalance_ms_p95")),
            duration(r.get("rebalance_ms_p99")),
            _count(r.get("unowned_partition_seconds")),
            _ps(r.get("unowned_ps_p95")),
        )
        for r in listed
    ]
    if rows:
        total = sum(float(r.get("unowned_partition_seconds") or 0) for r in listed)
        rows.append(("<strong>all rebalances</strong>", _count(_rebalances(data)), "", "", "", _count(total), ""))
    headers = [
        ("rebalances by protocol", False), ("rebalances", True), ("p50", True), ("p95", True), ("p99", True),
        ("unowned p-s", True), ("p-s p95", True),
    ]  # fmt: skip
    return f'<div style="margin-top:18px">{_table_html(headers, rows)}</div>'


def _causes_section(data: ReportData) -> str:
    causes: dict[str, int] = {k: int(v) for k, v in ((data.overall or {}).get("causes") or {}).items()}
    total = sum(causes.values()) or 1
    rows = [
        (
            f'<span class="bar" style="width:{max(2, round(140 * n / total))}px;'
            f'background:{CAUSE_COLORS.get(cause, OTHER)}"></span>{_e(cause)}',
            _count(n),
            f"{100 * n / total:.1f}%",
        )
        for cause, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    table = _table_html([("cause", False), ("rebalances", True), ("share", True)], rows)
    return f'<section id="causes"><h2>What started the rebalances</h2>{table}</section>'


def _groups_section(data: ReportData) -> str:
    rows = []
    for g in data.groups:
        # Counted from the rebalances table as every other count of the page (``gather._stats``): the summary
        # row only when that table was not there.
        s = data.group_stats.get(str(g["group_id"]))
        after = s if s is not None else g
        rows.append(
            (
                f"<code>{_e(g['group_id'])}</code>",
                _count(after.get("rebalances")),
                _count(after.get("formations")),
                duration(after.get("rebalance_ms_p50")),
                duration(after.get("rebalance_ms_p99")),
                duration(after.get("rebalance_ms_max")),
                _count(g.get("expirations")),
                f"{(s['steady_ups'] if s is not None else g.get('unowned_partition_seconds')) or 0:,.0f}",
                f"{s.get('formation_ups') or 0:,.0f}" if s is not None else "-",
                " / ".join(f"{int(after.get(p) or 0):,}" for p in (*PROTOCOLS, "no_protocol")),
                _e(
                    ", ".join(f"{k} {v}" for k, v in sorted((g.get("causes") or {}).items(), key=lambda kv: -kv[1])[:3])
                ),
            )
        )
    headers = [
        ("group", False), ("rebalances", True), ("formed", True), ("p50", True), ("p99", True), ("max", True),
        ("expired", True), ("unowned p-s", True), ("formation p-s", True),
        ("eager / coop / consumer / none", True),
        ("top causes", False),
    ]  # fmt: skip
    note = (
        f"The {len(data.groups)} of {data.group_count:,} groups with the most rebalances (formations included); "
        "durations and unowned partition-seconds after the group's formation (its own column); by protocol after "
        "formation, none: ended Empty or deleted before any sync."
    )
    return f'<section id="groups"><h2>Groups</h2><p class="note">{_e(note)}</p>{_table_html(headers, rows)}</section>'


def _slowest_section(data: ReportData) -> str:
    rows = [
        (
            f"<code>{_e(r['group_id'])}</code>",
            _count(r.get("generation")),
            _e(r.get("cause"))
            + (f' <span class="muted">({_times(r["restarts"])})</span>' if r.get("restarts") else ""),
            f'<span class="nowrap">{_when(r.get("start_ms"), short=True)}</span>',
            duration(r.get("duration_ms")),
            f"{_count(r.get('members_before'))} → {_count(r.get('members_after'))}",
            _count(r.get("partitions_moved")),
            f"{r.get('unowned_partition_seconds') or 0:,.1f}",
            _e(r.get("outcome")),
            _protocol_tag(r.get("rebalance_protocol")),
        )
        for r in data.slowest
    ]
    headers = [
        ("group", False), ("gen", True), ("cause", False), ("started (UTC)", False), ("duration", True),
        ("members", True), ("moved", True), ("unowned p-s", True), ("outcome", False),
        ("protocol", False),
    ]  # fmt: skip
    note = "After the groups' formation (a formation waits out the initial rebalance delay by design)."
    return (
        f'<section id="slowest"><h2>Slowest rebalances</h2><p class="note">{_e(note)}</p>'
        f"{_table_html(headers, rows)}</section>"
    )


def _input_section(data: ReportData) -> str:
    rows = []
    classes = []
    for r in data.input_rows:
        kind, count = str(r["kind"]), int(r["count"] or 0)
        examples = "".join(f'<pre class="example">{_e(x)}</pre>' for x in (r.get("examples") or []))
        rows.append((f"<span>{_e(kind)}</span>", _count(count), examples or '<span class="muted">-</span>'))
        classes.append("bad" if kind not in ("lines", "parsed") and count else "")
    table = _table_html([("kind", False), ("lines", True), ("examples (file:line: text)", False)], rows, classes)
    note = f"Every line of the input, by what the job made of it; {BAD_KINDS_HINT}."
    table = table.replace("<td><span>", '<td class="kind"><span>')
    return f'<section id="input"><h2>Input</h2><p class="note">{_e(note)}</p>{table}</section>'
