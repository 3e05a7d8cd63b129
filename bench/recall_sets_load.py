"""The labelled recall sets the quality benchmark asks: the committed chat and docs sets
(``bench/recall_sets/``, built by ``build.py`` from registry packages) and, when a user has it,
LoCoMo (Maharana et al., ACL 2024, CC BY-NC 4.0: never committed here), read from a path.

LoCoMo mapping (fixed here so every number is computed from the same notes): one bank per
conversation (``user:locomo-<id>``), one note per turn (``"<speaker>: <text>"``, plus
``" [shares a photo: <caption>]"`` when the turn shares one; kind ``turn``, tagged
``stream:<id>-S<session>``, created at the session's date plus the turn's index in seconds); one
question per QA item of categories 1-4 whose evidence names a turn; split by conversation:
26, 30, 42 and 44 are the tuning split, the six others held out.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

SETS = Path(__file__).resolve().parent / "recall_sets"
LOCOMO_TUNING = {"26", "30", "42", "44"}
LOCOMO_TYPES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class RecallSet:
    """Notes to import and questions to ask, with each question's split and evidence."""

    name: str
    notes: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)

    def split(self, name: str) -> list[dict[str, Any]]:
        """The questions of one split (``tuning`` or ``held-out``)."""
        return [q for q in self.questions if q["split"] == name]


def committed_set(name: str) -> RecallSet:
    """``chat`` or ``docs`` from ``bench/recall_sets/``."""
    found = RecallSet(name)
    for line in (SETS / f"{name}.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        (found.notes if record["type"] == "note" else found.questions).append(record)
    return found


def _conversations(path: Path) -> dict[str, dict[str, Any]]:
    """LoCoMo conversations by id from a folder of ``<id>.json`` files, the upstream
    ``locomo10.zip`` holding them, or ``locomo10.json`` (a list with ``sample_id``)."""
    if path.is_dir():
        files = sorted(path.rglob("*.json"))
        if len(files) == 1 and files[0].name == "locomo10.json":
            return _conversations(files[0])
        return {f.stem: json.loads(f.read_text("utf-8")) for f in files if f.stem.isdigit()}
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as bundle:
            return {Path(n).stem: json.loads(bundle.read(n)) for n in bundle.namelist()
                    if n.endswith(".json") and Path(n).stem.isdigit()}
    data = json.loads(path.read_text("utf-8"))
    return {str(item["sample_id"]).split("-")[-1]: item.get("conversation", item) | {
        "qa": item.get("qa", [])} for item in data}


def _evidence(raw: list[Any]) -> list[str]:
    ids = []
    for entry in raw:
        for part in re.split(r"[;,]\s*|\s+", str(entry)):
            match = re.fullmatch(r"D(\d+):(\d+)", part.strip())
            if match:
                ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(ids))


def locomo_set(path: Path) -> RecallSet:
    """LoCoMo mapped as the module docstring says."""
    found = RecallSet("locomo")
    for conv, data in sorted(_conversations(path).items(), key=lambda kv: int(kv[0])):
        bank = f"user:locomo-{conv}"
        turns: set[str] = set()
        sessions = sorted((k for k in data if re.fullmatch(r"session_\d+", k)),
                          key=lambda k: int(k.split("_")[1]))
        for key in sessions:
            when = datetime.strptime(data[f"{key}_date_time"].replace(",", ""),
                                     "%I:%M %p on %d %B %Y")
            for index, turn in enumerate(data[key]):
                body = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    body += f" [shares a photo: {turn['blip_caption']}]"
                turns.add(turn["dia_id"])
                found.notes.append({
                    "id": f"locomo{conv}-{turn['dia_id'].replace(':', '-')}", "namespace": bank,
                    "body": body, "kind": "turn", "tags": [f"stream:{conv}-S{key[8:]}"],
                    "author": turn["speaker"],
                    "created_at_ms": int((when.timestamp() + index) * 1000)})
        for number, qa in enumerate(data.get("qa", [])):
            if qa.get("category") not in LOCOMO_TYPES:
                continue
            evidence = [e for e in _evidence(qa.get("evidence", [])) if e in turns]
            if evidence:
                found.questions.append({
                    "id": f"locomo{conv}-q{number}", "banks": [bank], "question": qa["question"],
                    "split": "tuning" if conv in LOCOMO_TUNING else "held-out", "set": "locomo",
                    "type": LOCOMO_TYPES[qa["category"]],
                    "evidence": [f"locomo{conv}-{e.replace(':', '-')}" for e in evidence]})
    return found
