"""Charts drawn on the server as inline SVG: no script, no library, nothing fetched.

Only numbers and our own labels go into the drawing, and every text passes ``escape``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT = 600, 140
LEFT, BOTTOM, TOP = 44, 20, 10


def bar_chart(
    points: Sequence[tuple[datetime, float]],
    *,
    label: str,
    css: str,
    unit: str = "",
    ceiling: float | None = None,
) -> Markup:
    """Bars over time, one per point, with the largest value (or ``ceiling``) as the top line."""
    top = ceiling if ceiling is not None else max((value for _, value in points), default=0.0)
    top = top or 1.0
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    step = plot_w / max(len(points), 1)
    parts = [
        f'<svg class="chart {escape(css)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" preserveAspectRatio="none">',
        f"<title>{escape(label)}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH}" y2="{TOP + plot_h}"/>',
        f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH}" y2="{TOP}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">'
        f"{escape(_short(top))}{escape(unit)}</text>",
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">0</text>',
    ]
    for i, (moment, value) in enumerate(points):
        height = max(0.0, min(value / top, 1.0)) * plot_h
        x = LEFT + i * step
        parts.append(
            f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{TOP + plot_h - height:.1f}" '
            f'width="{step * 0.8:.1f}" height="{height:.1f}">'
            f"<title>{escape(_clock(moment))} UTC: {escape(_short(value))}{escape(unit)}</title></rect>"
        )
    if points:
        first, last = points[0][0], points[-1][0]
        parts.append(f'<text class="tick" x="{LEFT}" y="{HEIGHT - 4}">{escape(_clock(first))}</text>')
        parts.append(
            f'<text class="tick" x="{WIDTH}" y="{HEIGHT - 4}" text-anchor="end">'
            f"{escape(_clock(last))} UTC</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M")


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value == int(value):
        return str(int(value))
    return f"{value:.1f}"
