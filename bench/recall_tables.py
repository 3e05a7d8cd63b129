"""Markdown tables of the recall benchmarks' JSON results, for docs/benchmarks/ (so the
figures there are the ones a run wrote, not retyped).

    python bench/recall_tables.py quality     # bench/results/bench_recall_quality.json
    python bench/recall_tables.py sweep       # bench/results/bench_recall_quality_sweep.json
    python bench/recall_tables.py latency     # bench/results/bench_recall.json
    python bench/recall_tables.py study [FILE]  # bench/results/bench_recall_fusion_study.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SYSTEMS = ("keyword", "semantic", "hybrid", "bm25s", "dense", "RRF bm25s+dense")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) and value <= 1.0 else str(value)


def quality(data: dict[str, Any]) -> str:
    """One table per set: every system on both splits, then hybrid's paired differences."""
    out = [f"encoder `{data['encoder']}`; load average {data['load_average_before']} before, "
           f"{data['load_average_after']} after", ""]
    for name, splits in data["results"].items():
        for split, part in splits.items():
            out += [f"**{name} / {split}** ({part['questions']} questions)", "",
                    "| system | hit@5 | hit@10 | recall@5 | recall@10 | evidence in block "
                    "| p50 ms | p95 ms |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
            for system in SYSTEMS:
                m = part["systems"].get(system)
                if m is None:
                    continue
                cells = [m["hit@5"], m["hit@10"], m["recall@5"], m["recall@10"],
                         m.get("evidence in block"), m.get("p50 ms"), m.get("p95 ms")]
                out.append(f"| {system} | " + " | ".join(_cell(c) for c in cells) + " |")
            out += ["", "| hit@10, paired over questions | difference | 95% bootstrap CI "
                    "| won / lost |", "|---|---:|---:|---:|"]
            for label, p in part["paired hit@10"].items():
                out.append(f"| {label} | {p['diff']:+.3f} | [{p['low']:+.3f}, {p['high']:+.3f}]"
                           f" | {p['wins']} / {p['losses']} |")
            out.append("")
    return "\n".join(out)


def sweep(data: dict[str, Any]) -> str:
    """hit@10 of every variant on each set's tuning split, and their mean."""
    rows = data["hit@10 on the tuning splits"]
    sets = list(next(iter(rows.values())))
    out = ["| variant (tuning splits, hit@10) | " + " | ".join(sets) + " | mean |",
           "|---|" + "---:|" * (len(sets) + 1)]
    for label, row in rows.items():
        values = [row.get(s) for s in sets]
        mean = sum(v for v in values if v is not None) / max(len(values), 1)
        out.append(f"| {label} | " + " | ".join(_cell(v) for v in values) + f" | {mean:.3f} |")
    return "\n".join(out)


def study(data: dict[str, Any]) -> str:
    """The fusion study: each fusion's hit@10 per tuning split with the questions it won and
    lost against the default, and its paired difference against dense on the first set
    (chat: where dense alone is strongest) with the 95% interval."""
    rows = {k: v for k, v in data["fusions"].items() if isinstance(v, dict) and "mean" in v}
    sets = [s for s in next(iter(rows.values())) if s != "mean"]
    dense = data["fusions"]["dense"]
    out = [f"encoder `{data['encoder']}`, tuning splits; dense alone: "
           + ", ".join(f"{s} {dense[s]:.3f}" for s in sets), "",
           "| fusion | " + " | ".join(f"{s} (won / lost vs default)" for s in sets)
           + f" | mean | {sets[0]} − dense [95% CI] |",
           "|---|" + "---:|" * (len(sets) + 2)]
    for label, row in rows.items():
        cells = [f"{row[s]['hit@10']:.3f} ({row[s]['- default']['wins']} / "
                 f"{row[s]['- default']['losses']})" for s in sets]
        p = row[sets[0]]["- dense"]
        out.append(f"| {label} | " + " | ".join(cells) + f" | {row['mean']:.3f} | "
                   f"{p['diff']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}] |")
    return "\n".join(out)


BEFORE = "encoder, documents' graph"  # the query encoded as before this round (float graph)


def latency(data: dict[str, Any]) -> str:
    """Keyword, hybrid (fresh and repeated queries) and their floors per size and query."""
    out = [f"load average {data['load_average_before']} before, "
           f"{data['load_average_after']} after", "",
           "| notes | query | keyword p50 / p95 | hybrid fresh p50 / p95 | hybrid repeated "
           "p50 / p95 | fresh p95 / keyword p95 | repeated p95 / keyword p95 | encoder p50 / p95 "
           "| encoder on the documents' graph p50 / p95 | numpy floor p50 / p95 "
           "| Tether vector search p50 / p95 "
           "| overlap@10: keyword vs bm25, semantic vs numpy | full scan p50 |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["results"]:
        def pair(key: str, row: dict[str, Any] = r) -> str:
            if f"{key} p50 ms" not in row:
                return "-"
            return f"{row[f'{key} p50 ms']:.1f} / {row[f'{key} p95 ms']:.1f}"
        def ratio(key: str, row: dict[str, Any] = r) -> str:
            if f"{key} p95 ms" not in row:
                return "-"
            return f"{row[f'{key} p95 ms'] / row['keyword p95 ms']:.1f}"
        out.append(
            f"| {r['notes']:,} | {r['query']} | {pair('keyword')} | "
            f"{pair('hybrid (fresh query)')} | {pair('hybrid (repeated query)')} | "
            f"{ratio('hybrid (fresh query)')} | {ratio('hybrid (repeated query)')} | "
            f"{pair('encoder')} | {pair(BEFORE)} | "
            f"{pair('numpy vector floor')} | "
            f"{pair('tether vector search')} | "
            f"{r['overlap@10 vs exact bm25']:.2f}, {r.get('semantic overlap@10 vs numpy', '-')}"
            f" | {r['full scan p50 ms']:.0f} |")
    return "\n".join(out)


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "quality"
    files = {"quality": "bench_recall_quality.json", "sweep": "bench_recall_quality_sweep.json",
             "latency": "bench_recall.json", "study": "bench_recall_fusion_study.json"}
    render = {"quality": quality, "sweep": sweep, "latency": latency, "study": study}[kind]
    name = sys.argv[2] if len(sys.argv) > 2 else files[kind]
    print(render(json.loads((RESULTS / name).read_text())))
