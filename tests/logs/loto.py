"""Leave-one-thread-out scoring of the log signatures (used by test_leave_one_thread_out.py and
to write the score table in docs/diagnosis.md).

A fixture's *thread* is the public issue thread its ``.source`` names (the URL without a
comment anchor). For every rule and every thread among its fixtures, the signatures written
for that thread (their ``source`` is that URL) are held out, and the thread's fixtures are
diagnosed with all the rest: a *hit* is the rule named first. So a hit means the rule's
wording family, written from other threads and from the libraries' sources, generalizes to a
log nobody tuned it for.

*Strict* scoring also holds out the signatures whose ``first_seen`` names that thread: the
wordings first taken from it and later re-derived from a library's own message (their
``source`` then names the library). It is the lower bound: it asks whether the rule would
still be found had that thread never been read at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.logs.matcher import Matcher
from gpudoctor.logs.ranking import rank
from gpudoctor.logs.reader import iter_byte_chunks
from gpudoctor.knowledge import load_rules_toml
from gpudoctor.logs.signatures import load_signatures

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def thread_of(source_text: str) -> str:
    first = source_text.strip().split()[0] if source_text.strip() else ""
    return re.sub(r"[#?].*$", "", first).rstrip("/")


@dataclass(frozen=True)
class RuleScore:
    rule: str
    fixtures: int
    threads: int
    hits: int  # held-out threads whose fixtures were all diagnosed as the rule first
    in_sample: int  # fixtures diagnosed as the rule first with every signature


def _first_rule(matcher: Matcher, log: Path) -> str | None:
    scanner = matcher.scanner()
    scanner.start_source(str(log))
    for chunk in iter_byte_chunks(str(log)):
        scanner.feed(chunk)
    scanner.close()
    diagnoses = rank(scanner.hits.values())
    return diagnoses[0].rule if diagnoses else None


def first_seen() -> dict[str, frozenset[str]]:
    """Signature id -> the threads its wordings were first taken from (one, or a list where a signature
    was widened for a wording read in a later thread), where it was re-derived later."""
    seen = {}
    for raw in load_rules_toml("signatures.toml")["signature"]:
        threads = raw.get("first_seen") or ()
        if isinstance(threads, str):
            threads = (threads,)
        if threads:
            seen[raw["id"]] = frozenset(thread_of(t) for t in threads)
    return seen


def score(strict: bool = False) -> list[RuleScore]:
    signatures = load_signatures()
    seen = first_seen() if strict else {}
    full = Matcher(signatures)
    scores = []
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "healthy"):
        logs = sorted(folder.glob("*.log"))
        by_thread: dict[str, list[Path]] = {}
        for log in logs:
            by_thread.setdefault(thread_of(log.with_suffix(".source").read_text()), []).append(log)
        hits = 0
        for thread, thread_logs in by_thread.items():
            held_out = Matcher(s for s in signatures if thread_of(s.source) != thread and thread not in seen.get(s.id, ()))
            if all(_first_rule(held_out, log) == folder.name for log in thread_logs):
                hits += 1
        in_sample = sum(_first_rule(full, log) == folder.name for log in logs)
        scores.append(RuleScore(folder.name, len(logs), len(by_thread), hits, in_sample))
    return scores


def thread_scores(threads: set[str]) -> dict[str, tuple[int, int]]:
    """For the fixtures of ``threads`` only (a held-out round that joined the fixtures): threads in all,
    and threads hit in-sample, leave-one-thread-out and strict, as (hits, threads)."""
    signatures = load_signatures()
    seen = first_seen()
    full = Matcher(signatures)
    counts = {"in-sample": 0, "leave-one-thread-out": 0, "strict": 0}
    total = 0
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "healthy"):
        by_thread: dict[str, list[Path]] = {}
        for log in sorted(folder.glob("*.log")):
            thread = thread_of(log.with_suffix(".source").read_text())
            if thread in threads:
                by_thread.setdefault(thread, []).append(log)
        for thread, logs in by_thread.items():
            total += 1
            loto = Matcher(s for s in signatures if thread_of(s.source) != thread)
            strict = Matcher(s for s in signatures if thread_of(s.source) != thread and thread not in seen.get(s.id, ()))
            for name, matcher in (("in-sample", full), ("leave-one-thread-out", loto), ("strict", strict)):
                counts[name] += all(_first_rule(matcher, log) == folder.name for log in logs)
    return {name: (hits, total) for name, hits in counts.items()}


def markdown_table(scores: list[RuleScore], strict: list[RuleScore] | None = None) -> str:
    """The score table; with ``strict`` scores, a column for the strict held-out hits too."""
    strict_by_rule = {s.rule: s for s in strict or ()}
    extra_head, extra_rule = (" strict held-out hits |", " ---: |") if strict else ("", "")
    rows = [f"| rule | fixtures | distinct threads | in-sample hits | leave-one-thread-out hits |{extra_head}",
            f"| --- | ---: | ---: | ---: | ---: |{extra_rule}"]
    for s in scores:
        extra = f" {strict_by_rule[s.rule].hits}/{s.threads} |" if strict else ""
        rows.append(f"| `{s.rule}` | {s.fixtures} | {s.threads} | {s.in_sample}/{s.fixtures} | {s.hits}/{s.threads} |{extra}")
    fixtures = sum(s.fixtures for s in scores)
    threads = sum(s.threads for s in scores)
    extra = f" {sum(s.hits for s in strict)}/{threads} |" if strict else ""
    rows.append(f"| **all** | {fixtures} | {threads} | {sum(s.in_sample for s in scores)}/{fixtures} | "
                f"{sum(s.hits for s in scores)}/{threads} |{extra}")
    return "\n".join(rows)


DOCS = FIXTURES.parents[1] / "docs" / "diagnosis.md"
_START, _END = "<!-- loto-table", "<!-- /loto-table -->"


def write_docs(table: str) -> None:
    text = DOCS.read_text()
    head, _, rest = text.partition(_START)
    marker, _, rest = rest.partition("\n")
    _, _, tail = rest.partition(_END)
    DOCS.write_text(f"{head}{_START}{marker}\n{table}\n{_END}{tail}")


if __name__ == "__main__":
    import sys

    if "--threads-from" in sys.argv:  # e.g. the folder a held-out round was collected in (its .source files)
        folder = Path(sys.argv[sys.argv.index("--threads-from") + 1])
        chosen = {thread_of(p.read_text()) for p in folder.rglob("*.source")}
        for name, (hits, total) in thread_scores(chosen).items():
            print(f"{name}: {hits}/{total}")
        sys.exit(0)
    table = markdown_table(score(), score(strict=True))
    if "--write-docs" in sys.argv:
        write_docs(table)
    print(table)
