"""serve.png: per target, TTFT and end to end (p50 solid, p99 dashed and hollow) and output
tokens/s against the request rate each setting achieved, one line through the rates
(circles) and one through the concurrencies (squares); each point labelled with its setting
(r2: rate 2/s, c4: concurrency 4). Where latency turns up while the rate stops growing is
the knee."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PANELS = (("ttft_ms", "TTFT, ms"), ("e2e_ms", "end to end, ms"),
          ("output_tokens_per_s", "output tokens/s"))


def plot(result: dict[str, Any], path: Path) -> bool:
    """Writes the figure; False (nothing written) when no setting finished a request."""
    rows = [r for r in result["settings"] if r["requests_per_s"]]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")  # no display; must come before pyplot
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.5))
    targets = list(dict.fromkeys(r["target"] for r in rows))
    for ax, (key, label) in zip(axes, PANELS, strict=False):
        for i, target in enumerate(targets):
            for mode, marker in (("rate", "o"), ("concurrency", "s")):
                mine = sorted((r for r in rows if r["target"] == target
                               and r["setting"].startswith(mode)),
                              key=lambda r: r["requests_per_s"])
                if mine:
                    _series(ax, mine, key, (f"C{i}", marker), f"{target} {mode}")
        ax.set_xlabel("achieved requests/s")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"strictcall-bench serve: {', '.join(result['workload']['names'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _series(ax: Any, rows: list[dict[str, Any]], key: str, look: tuple[str, str],
            name: str) -> None:
    x = [r["requests_per_s"] for r in rows]
    color, marker = look
    if key == "output_tokens_per_s":
        ax.plot(x, [r[key] for r in rows], marker=marker, color=color, label=name)
    else:
        for q, style, face in (("p50", "-", color), ("p99", "--", "none")):
            ax.plot(x, [r[key][q] for r in rows], marker=marker, linestyle=style,
                    color=color, markerfacecolor=face, label=f"{name} {q}")
    for r in rows:
        y = r[key] if key == "output_tokens_per_s" else r[key]["p50"]
        if y is not None:
            ax.annotate(_short(r["setting"]), (r["requests_per_s"], y), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))


def _short(label: str) -> str:
    kind, _, value = label.partition(" ")
    return ("r" if kind == "rate" else "c") + value.removesuffix("/s")
