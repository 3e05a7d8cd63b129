"""Generate Tether's recall dev set: a corpus of agent notes and labelled questions.

    python bench/recall_dev/generate.py        # writes corpus.jsonl and questions.jsonl here

Everything is made up here from templates and seeded choices (nothing is copied from a public
benchmark). The corpus imitates what agents write into memory over months: several banks
(workflow, agent, user and project banks), notes by different authors, each note carrying its
author and date (words that occur in most notes of a bank, like speaker names in a chat log),
status updates and chit-chat, and near-miss notes that share most words with an answer but are
about another service. Some notes are proposals that were rejected or superseded, so the read
contract matters; some notes only repeat a question.

Questions, each labelled with its evidence notes (``type`` says what it tests):

* ``word-form``: the question uses other forms of the note's words (dropped/drop,
  researching/research);
* ``paraphrase``: no content word in common with the evidence (hand-written pairs, and
  templates where only the service name is shared);
* ``sentence``: a natural question whose answer note shares a few words;
* ``multi-hop``: two evidence notes (which team owns a service + where that team is paged);
* ``near-miss``: distractors differ from the answer only by the service named;
* ``superseded``: the live answer replaced an older note;
* ``echo``: a note repeating the question exists and must not win;
* ``identifier``: the question names an error code, ticket or file that only the answer
  holds, among many notes with codes of the same shape (exact words matter).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paraphrases import PAIRS

HERE = Path(__file__).resolve().parent
SEED = 20_260_101
START_MS = 1_735_689_600_000  # 2025-01-01
DAY_MS = 86_400_000

SERVICES = [
    "payments-api", "billing-worker", "search-indexer", "auth-gateway", "notification-service",
    "ledger-sync", "image-resizer", "report-builder", "feature-flags", "session-store",
    "rate-limiter", "audit-log", "inventory-api", "checkout-web", "email-relay",
    "metrics-collector", "geo-lookup", "pdf-renderer", "chat-backend", "order-router",
    "price-engine", "tax-calculator", "loyalty-points", "shipping-quotes",
]
TEAMS = ["platform", "growth", "data", "identity", "storefront", "infra", "payments", "mobile"]
CHANNELS = ["#plat-pager", "#growth-alerts", "#data-oncall", "#id-incidents", "#store-pager",
            "#infra-911", "#pay-oncall", "#mobile-alerts"]
DATABASES = ["Postgres 14", "Postgres 15", "MySQL 8", "Redis 7", "DynamoDB", "Cassandra 4",
             "SQLite", "MongoDB 6"]
LIBRARIES = ["celery", "requests-cache", "ujson", "gevent", "sqlalchemy-utils", "boto2",
             "simplejson", "pylibmc"]
PROBLEMS = ["memory leaks under load", "eviction storms", "thread starvation",
            "connection pool exhaustion", "slow cold starts", "race conditions on retry",
            "silent data truncation", "unbounded queue growth"]
CAUSES = ["an expired TLS certificate", "a full disk on the primary", "a bad config push",
          "a runaway cron job", "DNS resolution failures", "a leaked file descriptor",
          "an unindexed query", "a stuck deploy lock"]
FIXES = ["renewing the certificate", "purging old WAL segments", "reverting the config",
         "killing the cron job", "switching resolvers", "restarting the pods",
         "adding the missing index", "clearing the lock by hand"]
COMMANDS = ["make migrate-check", "./scripts/preflight.sh", "tox -e schema", "just verify-db",
            "npm run lint:migrations", "cargo xtask check", "bin/smoke --fast",
            "make contract-test"]
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
CHATTER = [
    "Thanks, will look tomorrow.", "Bye!", "Sounds good to me.", "Back from lunch.",
    "Can someone review my change?", "Standup moved to 10:30 today.", "Nice work everyone.",
    "I'm out on Friday.", "Pushed a fix, please re-run.", "Looking into it now.",
    "Dashboards look green.", "Ping me if anything breaks.", "Merged, thanks for the review.",
    "CI is slow again today.", "Who has context on this?", "Closing this thread.",
]
FILLER = [
    "{s} dashboards look fine today.", "Reviewed the {s} change, only minor nits.",
    "{s} latency is back to normal after the weekend.", "Bumped {s} dependencies.",
    "{s} logs are noisy; filed a ticket to trim them.", "Paired with {p} on {s} tests.",
    "{s} release notes are drafted.", "Reran the {s} load test; numbers unchanged.",
    "Updated the {s} README with setup steps.", "{s} alerts were tuned down a notch.",
]
BANKS = {
    "ownership": "agent:triage",
    "runbook": "workflow:incident-runbook",
    "review": "workflow:code-review",
    "project": "workflow:project-platform",
}


class Corpus:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.notes: list[dict[str, object]] = []
        self.questions: list[dict[str, object]] = []
        self.days: dict[str, int] = {}

    def note(self, bank: str, text: str, *, status: str = "accepted",
             supersedes: tuple[str, ...] = (), author: str | None = None) -> str:
        note_id = f"d{len(self.notes):05d}"
        author = author or self.rng.choice(PEOPLE)
        day = self.rng.randrange(0, 300)
        if supersedes:  # a replacement comes after what it replaces
            day = max(self.days[t] for t in supersedes) + 1 + self.rng.randrange(0, 20)
        self.days[note_id] = day
        date = f"2025-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}"
        self.notes.append({
            "id": note_id, "namespace": bank, "body": f"{author} on {date}: {text}",
            "author": author, "created_at_ms": START_MS + day * DAY_MS + len(self.notes),
            "status": status, "supersedes": list(supersedes),
        })
        return note_id

    def ask(self, kind: str, banks: list[str], question: str, evidence: list[str]) -> None:
        self.questions.append({
            "id": f"q{len(self.questions):04d}", "type": kind, "banks": banks,
            "question": question, "evidence": evidence,
        })


def build() -> Corpus:
    rng = random.Random(SEED)
    c = Corpus(rng)
    team_of = {s: TEAMS[i % len(TEAMS)] for i, s in enumerate(SERVICES)}
    channel_of = dict(zip(TEAMS, CHANNELS, strict=True))
    own, run, rev, proj = (BANKS[k] for k in ("ownership", "runbook", "review", "project"))
    team_notes = {t: c.note(own, f"The {t} team takes pages in {channel_of[t]}.") for t in TEAMS}
    for i, service in enumerate(SERVICES):
        team = team_of[service]
        db = DATABASES[i % len(DATABASES)]
        lib, problem = LIBRARIES[i % len(LIBRARIES)], PROBLEMS[(i * 3) % len(PROBLEMS)]
        cause, fix = CAUSES[i % len(CAUSES)], FIXES[i % len(FIXES)]
        command = COMMANDS[i % len(COMMANDS)]
        minutes = 10 + (i * 7) % 50
        owner = c.note(own, f"{service} is owned by the {team} team.")
        c.ask("sentence", [own], f"Which team owns {service}?", [owner])
        c.ask("multi-hop", [own], f"Where should I page someone about a {service} outage?",
              [owner, team_notes[team]])
        stored = c.note(proj, f"{service} stores its data in {db}.")
        c.ask("near-miss", [proj], f"Which database does {service} use?", [stored])
        dropped = c.note(rev, f"We dropped {lib} from {service} after researching {problem}.")
        c.ask("word-form", [rev], f"Why did we drop {lib} in {service}?", [dropped])
        c.ask("word-form", [rev], f"What was researched before dropping {lib}?", [dropped])
        preflight = c.note(rev, f"Run {command} before deploying {service}; it checks the "
                                "migrations.")
        c.ask("paraphrase", [rev], f"What must be executed prior to shipping {service}?",
              [preflight])
        c.ask("sentence", [rev], f"Which command checks the migrations for {service}?",
              [preflight])
        incident = c.note(run, f"{service} went down for {minutes} minutes because of {cause}; "
                               f"it was fixed by {fix}.")
        c.ask("sentence", [run], f"What caused the {service} outage?", [incident])
        c.ask("word-form", [run], f"How was the {service} downtime fixed?", [incident])
        c.ask("paraphrase", [run], f"Why was {service} unavailable?", [incident])
        old = c.note(proj, f"{service} deploys use blue-green switching.")
        new = c.note(proj, f"{service} deploys switched to canary releases at 5% traffic.",
                     supersedes=(old,))
        c.note(proj, f"Proposal: {service} deploys should go straight to 100% traffic.",
               status="rejected")
        c.ask("superseded", [proj], f"How do we deploy {service} now?", [new])
        code = f"E{4000 + i * 37}"
        ticket = f"OPS-{1200 + i * 13}"
        config_file = f"deploy/{service}/limits-{i % 5}.yaml"
        coded = c.note(run, f"{service} answers {code} when the upstream quota is exhausted.")
        c.note(run, f"{service} answers E{4000 + i * 37 + 1} when a request times out.")
        c.ask("identifier", [run], f"What does {code} mean?", [coded])
        tracked = c.note(proj, f"The {service} memory regression is tracked in {ticket}.")
        c.ask("identifier", [proj], f"Which problem is {ticket} about?", [tracked])
        limits = c.note(rev, f"Rate limits for {service} live in {config_file}.")
        c.ask("identifier", [rev], f"What is configured in {config_file}?", [limits])
        c.note(run, f"How do we rotate the {service} credentials?")
        rotate = c.note(run, f"Rotate {service} credentials with vault rotate {service}; "
                             "it takes effect within ten minutes.")
        c.ask("echo", [run], f"How do we rotate the {service} credentials?", [rotate])
    for bank, note, question in PAIRS:
        evidence = c.note(bank, note)
        c.ask("paraphrase", [bank], question, [evidence])
    # Filler: chit-chat and near-miss status notes in every bank, about 5,000 notes.
    banks = [own, run, rev, proj, "user:alice"]
    for _ in range(5_000):
        bank = rng.choice(banks)
        if rng.random() < 0.45:
            c.note(bank, rng.choice(CHATTER))
        else:
            text = rng.choice(FILLER).format(s=rng.choice(SERVICES), p=rng.choice(PEOPLE))
            c.note(bank, text)
    # Notes arrive in time order, as they would.
    c.notes.sort(key=lambda n: int(str(n["created_at_ms"])))
    return c


def main() -> None:
    corpus = build()
    with (HERE / "corpus.jsonl").open("w") as out:
        for note in corpus.notes:
            out.write(json.dumps(note, sort_keys=True) + "\n")
    with (HERE / "questions.jsonl").open("w") as out:
        for question in corpus.questions:
            out.write(json.dumps(question, sort_keys=True) + "\n")
    kinds: dict[str, int] = {}
    for q in corpus.questions:
        kinds[str(q["type"])] = kinds.get(str(q["type"]), 0) + 1
    print(f"{len(corpus.notes)} notes, {len(corpus.questions)} questions: {kinds}")


if __name__ == "__main__":
    main()
