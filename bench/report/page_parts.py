"""What the benchmark pages are made of (bench/report/pages.py): a rendered result, Markdown
tables of a benchmark's rows, PNG plots, and the generic rendering of any results shape."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Rendered:
    """A benchmark's results as the page shows them."""

    sections: list[str] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)  # file name -> PNG
    headline: str = ""


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A Markdown table of flat rows (columns: the union of their keys, in order)."""
    columns = columns or list(dict.fromkeys(k for r in rows for k in r
                                            if not isinstance(r[k], dict | list)))
    lines = ["| " + " | ".join(c.replace("_", " ") for c in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def png(draw: Callable[[Any], None], *, size: tuple[float, float] = (6.5, 4.0)) -> bytes:
    """A plot drawn by `draw(axes)`, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")  # no display; must come before pyplot
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out.getvalue()


def generic(results: Any) -> Rendered:
    return Rendered(sections=_sections(results, level=3))


def _sections(value: Any, *, level: int) -> list[str]:
    """Tables for whatever shape a benchmark wrote: rows, a mapping of scalars, nesting."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [table(value), ""]
    if isinstance(value, dict):
        flat = {k: v for k, v in value.items() if not isinstance(v, dict | list)}
        out = [table([{"measure": k, "value": v} for k, v in flat.items()]), ""] if flat \
            else []
        for key, nested in value.items():
            if isinstance(nested, dict | list) and nested:
                out += [f"{'#' * level} {str(key).replace('_', ' ')}", "",
                        *_sections(nested, level=min(level + 1, 6))]
        return out
    return [cell(value), ""]
