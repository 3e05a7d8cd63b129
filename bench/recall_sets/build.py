"""Build the labelled recall sets of ``bench/bench_recall_quality.py`` from real text that any
machine can install from a registry (see README.md beside this file for the procedure, the
sources and their licences).

    pip install chitchat-dataset==0.9.0
    apt-get download perl-doc python3.11-doc        # Debian 12 packages (documentation)
    python bench/recall_sets/build.py --perl-doc perl-doc_*.deb --python-doc python3.11-doc_*.deb

Writes ``chat.jsonl`` (human-human chat: one bank per participant) and ``docs.jsonl`` (FAQ
documentation: one bank per document set), each line a note or a question; every question has
a ``split``: ``tuning`` (constants may be chosen on it) or ``held-out`` (never looked at while
choosing). Deterministic: the same sources give the same bytes (``MANIFEST.json`` has their
sha256).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from store.search.search_policy import STOP_WORDS as STOP

HERE = Path(__file__).resolve().parent
# Procedure constants (README.md): banks of participants with at least MIN_CONVERSATIONS
# conversations, each cut to its first MAX_CONVERSATIONS (time order) to keep embedding short.
MIN_CONVERSATIONS = 20
MAX_CONVERSATIONS = 24
BANKS_PER_SPLIT = 25
MIN_QUESTION_WORDS = 3
MIN_ANSWER_WORDS = 5
DUPLICATE_JACCARD = 0.5
NOTE_BYTES = 1000
ANAPHORA = re.compile(r"\b(that|it|this|those|them|these|there|then|he|she|they|him|her)\b")


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP and len(w) > 2}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- chat: chitchat-dataset ------------------------------------------------------------------


def split_of(participant: str) -> str:
    """A participant's split, from a hash of their id (stable, independent of the data)."""
    return "tuning" if int(hashlib.sha256(participant.encode()).hexdigest(), 16) % 2 else (
        "held-out")


def build_chat(dataset: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One bank per heavy participant; a partner's self-contained question turn and the
    participant's reply are a question and its evidence (README.md, "chat")."""
    talks: dict[str, set[str]] = collections.defaultdict(set)
    for cid, conversation in dataset.items():
        for group in conversation["messages"]:
            for message in group:
                talks[message["sender"]].add(cid)
    heavy = sorted(p for p, cs in talks.items() if len(cs) >= MIN_CONVERSATIONS)
    side = {p: split_of(p) for p in heavy}
    lines: list[dict[str, Any]] = []
    chosen: dict[str, list[str]] = {"tuning": [], "held-out": []}
    for participant in heavy:
        split = side[participant]
        if len(chosen[split]) == BANKS_PER_SPLIT:
            continue
        # A conversation shared with a heavy participant of the other split is dropped, so no
        # text sits on both sides.
        own = [c for c in talks[participant]
               if not any(side.get(s) not in (None, split) for s in _senders(dataset[c]))]
        own.sort(key=lambda c: (dataset[c].get("start") or "", c))
        if len(own) < MIN_CONVERSATIONS:
            continue
        chosen[split].append(participant)
        lines += _bank_lines(dataset, participant, own[:MAX_CONVERSATIONS], split)
    stats = {split: len(ps) for split, ps in chosen.items()}
    return lines, stats


def _senders(conversation: dict[str, Any]) -> set[str]:
    return {m["sender"] for group in conversation["messages"] for m in group}


def _bank_lines(dataset: dict[str, Any], participant: str, conversations: list[str],
                split: str) -> list[dict[str, Any]]:
    bank = f"user:ccc-{participant[:8]}"
    notes: list[dict[str, Any]] = []
    candidates: list[dict[str, Any]] = []
    asked: set[str] = set()
    for cid in conversations:
        conversation = dataset[cid]
        start = datetime.fromisoformat(conversation["start"].replace("Z", "+00:00"))
        base_ms = int(start.timestamp() * 1000)
        groups = conversation["messages"]
        for index, group in enumerate(groups):
            who = "me" if group[0]["sender"] == participant else "friend"
            note_id = f"ccc-{participant[:6]}-{cid[:8]}-{index}"
            text = " ".join(" ".join(m["text"].split()) for m in group)
            notes.append({"type": "note", "id": note_id, "namespace": bank,
                          "body": f"{who}: {text}", "kind": "turn",
                          "tags": [f"stream:{cid[:8]}"], "author": who,
                          "created_at_ms": base_ms + index * 1000})
            following = groups[index + 1] if index + 1 < len(groups) else None
            if who != "friend" or following is None or following[0]["sender"] != participant:
                continue
            question = group[-1]["text"].strip()
            answer = " ".join(m["text"] for m in following)
            if (question.endswith("?") and re.search(r"\byour?\b", question.lower())
                    and len(content_words(question)) >= MIN_QUESTION_WORDS
                    and len(content_words(answer)) >= MIN_ANSWER_WORDS
                    and not ANAPHORA.search(question.lower())
                    and not answer.strip().endswith("?")):
                candidates.append({"question": question, "asked_in": note_id,
                                   "evidence": [f"ccc-{participant[:6]}-{cid[:8]}-{index + 1}"]})
    words = [content_words(c["question"]) for c in candidates]
    questions = []
    for j, candidate in enumerate(candidates):
        if any(k != j and len(words[j] & words[k]) / len(words[j] | words[k]) >= DUPLICATE_JACCARD
               for k in range(len(candidates))):
            continue  # a recurring question has many right answers
        asked.add(candidate["asked_in"])
        questions.append({"type": "question", "id": f"q-{candidate['asked_in']}", "banks": [bank],
                          "split": split, "set": "chat", **candidate})
    # The turn that asks a question is left out of the bank: the test is recall of the answer,
    # not of the question's own words.
    return [n for n in notes if n["id"] not in asked] + questions


# -- docs: perlfaq (tuning) and the Python FAQ (held out) ------------------------------------

_POD_CODE = re.compile(r"[A-Z]<<+\s(.*?)\s>>+|[A-Z]<([^<>]*)>")


def _pod_text(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = _POD_CODE.sub(lambda m: (m.group(1) or m.group(2) or "").split("|")[0], text)
    return text


def _rst_text(text: str) -> str:
    text = re.sub(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)
    return text.replace("``", "").replace("`", "")


def _chunks(paragraphs: list[str]) -> list[str]:
    """Answer paragraphs merged into notes of at most about :data:`NOTE_BYTES` bytes."""
    notes: list[str] = []
    for paragraph in (" ".join(p.split()) for p in paragraphs):
        if not paragraph:
            continue
        if notes and len(notes[-1].encode()) + len(paragraph.encode()) < NOTE_BYTES:
            notes[-1] += " " + paragraph
        else:
            notes.append(paragraph[: NOTE_BYTES * 2])
    return notes


def perl_sections(pod_dir: Path) -> list[tuple[str, list[str]]]:
    sections = []
    for path in sorted(pod_dir.glob("perlfaq[1-9].pod")):
        heading: str | None = None
        body: list[str] = []
        for paragraph in path.read_text("utf-8", "replace").split("\n\n"):
            if paragraph.startswith("=head"):
                if heading is not None:
                    sections.append((heading, body))
                heading, body = None, []
                if paragraph.startswith("=head2 "):
                    heading = _pod_text(paragraph[7:].strip())
            elif heading is not None and not paragraph.startswith("="):
                body.append(_pod_text(paragraph))
        if heading is not None:
            sections.append((heading, body))
    return sections


def python_sections(faq_dir: Path) -> list[tuple[str, list[str]]]:
    sections = []
    for path in sorted(faq_dir.glob("*.rst.txt")):
        lines = path.read_text("utf-8", "replace").splitlines()
        heading: str | None = None
        body: list[str] = []
        for i, line in enumerate(lines):
            under = lines[i + 1] if i + 1 < len(lines) else ""
            if line.strip() and re.fullmatch(r"([=\-~^\"'*+#])\1{2,}", under.strip()):
                if heading is not None:
                    sections.append((heading, body))
                heading, body = _rst_text(line.strip()), []
            elif heading is not None and not re.fullmatch(r"([=\-~^\"'*+#])\1{2,}", line.strip()):
                body.append(_rst_text(line))
        if heading is not None:
            sections.append((heading, body))
    return [(h, "\n".join(b).split("\n\n")) for h, b in sections]


def build_docs(perl: list[tuple[str, list[str]]],
               python: list[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """One note per answer chunk (heading removed), the heading as the question, the notes of
    its section as evidence; perlfaq is the tuning split, the Python FAQ held out."""
    lines: list[dict[str, Any]] = []
    for name, split, sections in (("perlfaq", "tuning", perl), ("pyfaq", "held-out", python)):
        bank = f"workflow:project-{name}"
        for number, (heading, paragraphs) in enumerate(sections):
            ids = []
            for part, text in enumerate(_chunks(paragraphs)):
                note_id = f"{name}-{number}-{part}"
                ids.append(note_id)
                lines.append({"type": "note", "id": note_id, "namespace": bank, "body": text,
                              "kind": "doc", "tags": [], "author": name,
                              "created_at_ms": 1_700_000_000_000 + number * 1000 + part})
            if heading.endswith("?") and ids:
                lines.append({"type": "question", "id": f"q-{name}-{number}", "banks": [bank],
                              "split": split, "set": "docs", "question": heading,
                              "evidence": ids})
    return lines


def unpack(deb: Path, into: Path) -> Path:
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)
    return into


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"
                            for line in lines), "utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perl-doc", type=Path, required=True, help="perl-doc_*.deb")
    parser.add_argument("--python-doc", type=Path, required=True, help="python3.11-doc_*.deb")
    args = parser.parse_args()
    import chitchat_dataset

    dataset_path = Path(chitchat_dataset.__path__[0]) / "dataset.json"
    chat, chat_banks = build_chat(json.loads(dataset_path.read_text("utf-8")))
    with tempfile.TemporaryDirectory() as scratch:
        perl = unpack(args.perl_doc, Path(scratch) / "perl")
        python = unpack(args.python_doc, Path(scratch) / "python")
        docs = build_docs(
            perl_sections(next(perl.glob("usr/share/perl/*/pod"))),
            python_sections(next(python.glob("usr/share/doc/python3*/html/_sources/faq"))))
    write(HERE / "chat.jsonl", chat)
    write(HERE / "docs.jsonl", docs)
    counts: dict[str, Any] = {}
    for name, lines in (("chat", chat), ("docs", docs)):
        for line in lines:
            key = f"{name} {line['type']}s" + (f" {line['split']}" if "split" in line else "")
            counts[key] = counts.get(key, 0) + 1
    (HERE / "MANIFEST.json").write_text(json.dumps({
        "sources": {
            "chitchat-dataset 0.9.0 (PyPI, MIT)": sha256(dataset_path),
            f"{args.perl_doc.name} (Debian, perl licence)": sha256(args.perl_doc),
            f"{args.python_doc.name} (Debian, PSF documentation licence)":
                sha256(args.python_doc),
        },
        "chat banks per split": chat_banks,
        "counts": counts,
        "files": {name: sha256(HERE / name) for name in ("chat.jsonl", "docs.jsonl")},
    }, indent=2, sort_keys=True) + "\n")
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    main()
