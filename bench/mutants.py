"""Score the proof of a migration (``autofix smoke MIGRATED --compare ORIGINAL``) on mutants.

    python bench/mutants.py [--fixtures] [--files DIR] [--only TEXT] [--part A|B] [--kind KIND]
                            [--heldout] [--json OUT] [--timeout S] [--replicas N] [--steps K]
                            [--max-per-kind N] [--sample N] [--assume-proven] [--batch N] [--dry]
                            [--verbose] [--markdown]
    python bench/mutants.py --report OUT.json [--markdown]

Takes migrations the proof proves (the migration corpus, bench/migrate/manifest.json,
migrated as bench/migrate.py migrates it; or, with ``--fixtures``, the small pairs of
fixtures/mutants/), makes every mutant of each (bench/mutants/: ``wrong`` ones, that no longer
train as the original does on N replicas, and ``right`` ones, that still do), and proves each
mutant against its original with ``compare_many`` (one TensorFlow process per batch). It
prints, per kind and in total, the mutation score (wrong mutants rejected, i.e. given any
status but ``equivalent``, of all wrong mutants) and the false alarms (right variants not
proven), and lists every surviving wrong mutant and every false alarm with the proof's message.

``--heldout`` runs the held-out operators (bench/mutants/heldout/) instead of the main set.
``--dry`` makes the mutants and checks that they parse, without TensorFlow.
Exit status: 0 when the score is 100% and there is no false alarm, 1 otherwise, 2 when there
is nothing to run (no corpus, no proven pair).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT / "fixtures" / "mutants"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

import mutants  # noqa: E402  (bench/mutants/, the operators)

EQUIVALENT = "equivalent"
REJECTED, SURVIVED, PROVEN, FALSE_ALARM = "rejected", "survived", "proven", "false alarm"
# What a proof says of training its comparing run never reached (autofix.smoke.compare): a
# survivor there is still a survivor, but one the verdict does not hide.
UNREACHED = "not compared: the training the script does after the steps compared"


@dataclass
class Subject:
    """A proven pair: an original and its migration, both as text, named as the file."""

    name: str
    original: str
    migrated: str
    note: str = ""


@dataclass
class Outcome:
    file: str
    kind: str
    label: str
    family: str
    what: str
    where: str
    status: str = ""  # the proof's status (compare.status, or harness-error)
    message: str = ""

    @property
    def verdict(self) -> str:
        if self.label == mutants.WRONG:
            return SURVIVED if self.status == EQUIVALENT else REJECTED
        return PROVEN if self.status == EQUIVALENT else FALSE_ALARM


@dataclass
class Summary:
    kinds: dict[str, dict] = field(default_factory=dict)  # kind -> {label, total, rejected/proven}
    wrong: int = 0
    rejected: int = 0
    right: int = 0
    proven: int = 0
    survivors: list[Outcome] = field(default_factory=list)
    false_alarms: list[Outcome] = field(default_factory=list)

    @property
    def score(self) -> float | None:
        return self.rejected / self.wrong if self.wrong else None

    @property
    def false_alarm_count(self) -> int:
        return self.right - self.proven


def summarize(outcomes: list[Outcome]) -> Summary:
    summary = Summary()
    for outcome in outcomes:
        row = summary.kinds.setdefault(outcome.kind, {"label": outcome.label, "family": outcome.family, "total": 0, "held": 0})
        row["total"] += 1
        verdict = outcome.verdict
        if outcome.label == mutants.WRONG:
            summary.wrong += 1
            if verdict == REJECTED:
                summary.rejected += 1
                row["held"] += 1
            else:
                summary.survivors.append(outcome)
        else:
            summary.right += 1
            if verdict == PROVEN:
                summary.proven += 1
                row["held"] += 1
            else:
                summary.false_alarms.append(outcome)
    return summary


def exit_status(summary: Summary) -> int:
    if summary.wrong + summary.right == 0:
        return 2
    return 0 if summary.rejected == summary.wrong and summary.proven == summary.right else 1


def markdown(summary: Summary) -> str:
    """The per-kind results as a Markdown table (for bench/mutants/README.md)."""
    lines = ["| kind | label | mutants | rejected / proven | score / false alarms |", "| --- | --- | ---: | ---: | ---: |"]
    for kind, row in sorted(summary.kinds.items(), key=lambda kv: (kv[1]["label"] == mutants.RIGHT, kv[1]["family"], kv[0])):
        tail = _pct(row["held"], row["total"]) if row["label"] == mutants.WRONG else str(row["total"] - row["held"])
        lines.append(f"| `{kind}` | {row['label']} | {row['total']} | {row['held']} | {tail} |")
    lines.append(f"| **all** | wrong | {summary.wrong} | {summary.rejected} | **{_pct(summary.rejected, summary.wrong)}** |")
    lines.append(f"| **all** | right | {summary.right} | {summary.proven} | **{summary.false_alarm_count}** |")
    return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(summary: Summary) -> str:
    lines = []
    wrong = {k: r for k, r in summary.kinds.items() if r["label"] == mutants.WRONG}
    right = {k: r for k, r in summary.kinds.items() if r["label"] == mutants.RIGHT}
    if wrong:
        lines.append(f"{'wrong kind':28} {'family':10} {'mutants':>7} {'rejected':>8} {'score':>6}")
        for kind, row in sorted(wrong.items(), key=lambda kv: (kv[1]["family"], kv[0])):
            lines.append(f"{kind:28} {row['family']:10} {row['total']:7} {row['held']:8} {_pct(row['held'], row['total']):>6}")
        lines.append("")
    if right:
        lines.append(f"{'right kind':28} {'family':10} {'variants':>8} {'proven':>7} {'false alarms':>12}")
        for kind, row in sorted(right.items()):
            lines.append(f"{kind:28} {row['family']:10} {row['total']:8} {row['held']:7} {row['total'] - row['held']:12}")
        lines.append("")
    lines.append(f"mutation score: {summary.rejected} of {summary.wrong} wrong mutants rejected ({_pct(summary.rejected, summary.wrong)})")
    unseen = [o for o in summary.survivors if UNREACHED in o.message]
    if unseen:
        lines.append(f"  of the survivors, {len(unseen)} changed training the proof says it did not compare ({UNREACHED} ...)")
    lines.append(f"false alarms: {summary.false_alarm_count} of {summary.right} right variants not proven")
    for title, items in (("surviving wrong mutants", summary.survivors), ("false alarms", summary.false_alarms)):
        if items:
            lines.append("")
            lines.append(f"{title}:")
            for o in items:
                lines.append(f"  {o.file} {o.where}: {o.kind}: {o.what}")
                lines.append(f"      {o.status}: {o.message}")
    return "\n".join(lines)


# --- the pairs -------------------------------------------------------------------------------
def fixture_subjects(only: list[str]) -> list[Subject]:
    found = []
    for original in sorted(FIXTURES.glob("*.original.py")):
        name = original.name.replace(".original.py", ".py")
        migrated = original.with_name(name.replace(".py", ".migrated.py"))
        if only and not any(o in name for o in only):
            continue
        found.append(Subject(name, original.read_text(encoding="utf-8"), migrated.read_text(encoding="utf-8")))
    return found


def corpus_subjects(folder: Path, only: list[str], parts: list[str]) -> tuple[list[Subject], list[str]]:
    """The corpus files autofix migrates (stable and clean, as bench/migrate.py asks), and a
    line for each file left out."""
    spec = _migrate_module()
    from autofix.engine import Options

    manifest = json.loads((HERE / "migrate" / "manifest.json").read_text(encoding="utf-8"))
    if only:
        manifest = [r for r in manifest if any(o in r["id"] for o in only)]
    if parts:
        manifest = [r for r in manifest if r.get("part", "A") in parts]
    options, plain = Options(migrate="mirrored"), Options()
    subjects, left = [], []
    for record in manifest:
        path = folder / record["id"]
        if not path.is_file():
            left.append(f"{record['id']}: missing")
            continue
        data = path.read_bytes()
        note = "its sha256 differs from the manifest's" if hashlib.sha256(data).hexdigest() != record["sha256"] else ""
        text = data.decode("utf-8")
        result = spec.migrate(text, record["id"], options)
        if result.new_text is None:
            left.append(f"{record['id']}: not migrated")
            continue
        again = spec.migrate(result.new_text, record["id"], options)
        check = spec.migrate(result.new_text, record["id"], plain)
        if again.new_text is not None or [f for f in check.findings if not f.suppressed and not f.unsafe]:
            left.append(f"{record['id']}: its migration is not stable or not clean")
            continue
        subjects.append(Subject(record["id"], text, result.new_text, note))
    return subjects, left


def _migrate_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("migrate_bench", HERE / "migrate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- proving ---------------------------------------------------------------------------------
def prove(pairs: list[tuple[str, str]], args) -> list[tuple[str, str]]:
    """(status, message) of each (migrated path, original path), in batches of one process."""
    from autofix.smoke import ComparePair, compare_many

    results: list[tuple[str, str]] = []
    for start in range(0, len(pairs), args.batch):
        batch = pairs[start : start + args.batch]
        begun = time.perf_counter()
        try:
            reports = compare_many([ComparePair(m, o) for m, o in batch], replicas=args.replicas, steps=args.steps, timeout=args.timeout, offline=True)
        except Exception as exc:  # the harness itself failed: every pair of the batch says so
            results += [("harness-error", f"{type(exc).__name__}: {exc}")] * len(batch)
            print(f"  batch from {start + 1} failed in the harness: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            continue
        for (migrated, _), report in zip(batch, reports):
            if report.compare is None:
                results.append(("harness-error", report.harness_error or "no comparison"))
            else:
                results.append((report.compare.status, report.compare.message))
            print(f"    {Path(migrated).parent.name}: {results[-1][0]}: {results[-1][1][:160]}", file=sys.stderr, flush=True)
        print(f"  proved {start + len(batch)} of {len(pairs)} ({time.perf_counter() - begun:.0f} s for this batch)", file=sys.stderr, flush=True)
    return results


def sampled(made: list, per_kind: int) -> list:
    """At most ``per_kind`` mutants of each kind, taken from the files in turn (a file's first
    mutant of the kind, then the next file's, ...), each kind starting at another file so that
    a small sample still spreads over the files; kept in the order they were made."""
    by_kind: dict[str, dict[str, list[int]]] = {}
    for n, (subject, m) in enumerate(made):
        by_kind.setdefault(m.kind, {}).setdefault(subject.name, []).append(n)
    kept: set[int] = set()
    for number, files in enumerate(by_kind.values()):
        queues = list(files.values())
        queues = queues[number % len(queues) :] + queues[: number % len(queues)]
        taken = 0
        while taken < per_kind and any(queues):
            for queue in queues:
                if queue and taken < per_kind:
                    kept.add(queue.pop(0))
                    taken += 1
    return [item for n, item in enumerate(made) if n in kept]


def _place(work: Path, tag: str, name: str, text: str) -> str:
    folder = work / tag
    folder.mkdir(parents=True)
    (folder / name).write_text(text, encoding="utf-8")
    return str(folder / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", action="store_true", help="the pairs of fixtures/mutants/ instead of the corpus")
    parser.add_argument("--files", help="the corpus folder (default: $AUTOFIX_MIGRATE_CORPUS, else bench/migrate/files)")
    parser.add_argument("--only", action="append", default=[], help="only files whose name contains this (repeatable)")
    parser.add_argument("--part", action="append", default=[], help="only the corpus files of this part (repeatable: A, B)")
    parser.add_argument("--kind", action="append", default=[], help="only mutants of this kind (repeatable)")
    parser.add_argument("--heldout", action="store_true", help="the held-out operators (bench/mutants/heldout/) instead of the main set")
    parser.add_argument("--json", help="also write every mutant's outcome here")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each run may take (default 300)")
    parser.add_argument("--max-per-kind", type=int, default=None, help="at most N mutants of each kind per file")
    parser.add_argument("--sample", type=int, default=None, help="at most N mutants of each kind over all files, taken from the files in turn")
    parser.add_argument("--assume-proven", action="store_true", help="do not prove the migrations first (an earlier run proved them: name them with --only)")
    parser.add_argument("--batch", type=int, default=40, help="pairs proven in one TensorFlow process (default 40)")
    parser.add_argument("--dry", action="store_true", help="make the mutants and check that they parse; no TensorFlow")
    parser.add_argument("--verbose", action="store_true", help="list every mutant")
    parser.add_argument("--report", metavar="JSON", help="print the results a --json run wrote, without running anything")
    parser.add_argument("--markdown", action="store_true", help="also print the results per kind as a Markdown table")
    args = parser.parse_args(argv)
    if args.report:
        record = json.loads(Path(args.report).read_text(encoding="utf-8"))
        fields = {f for f in Outcome.__dataclass_fields__}
        summary = summarize([Outcome(**{k: v for k, v in m.items() if k in fields}) for m in record["mutants"]])
        print(render(summary))
        if args.markdown:
            print("\n" + markdown(summary))
        return exit_status(summary)

    started = time.perf_counter()
    if args.fixtures:
        subjects, left = fixture_subjects(args.only), []
    else:
        folder = Path(args.files or os.environ.get("AUTOFIX_MIGRATE_CORPUS") or HERE / "migrate" / "files")
        if not folder.is_dir() or not any(folder.iterdir()):
            print(f"no corpus files in {folder}: see bench/migrate/README.md (or run with --fixtures)", file=sys.stderr)
            return 2
        subjects, left = corpus_subjects(folder, args.only, args.part)
    for line in left:
        print(f"left out: {line}")
    for subject in subjects:
        if subject.note:
            print(f"note: {subject.name}: {subject.note}")
    if not subjects:
        print("no migrated pair to mutate", file=sys.stderr)
        return 2
    kinds = [k.name for k in mutants.kinds(args.heldout)]
    unknown = [k for k in args.kind if k not in kinds]
    if unknown:
        print(f"unknown kind(s) {', '.join(unknown)}; the kinds are: {', '.join(kinds)}", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="autofix-bench-mutants-"))
    try:
        if args.assume_proven:
            print("the migrations are taken as proven (not proven again in this run)")
        elif not args.dry:
            subjects = _proven(subjects, work, args)
            if not subjects:
                print("no pair is proven: nothing to score", file=sys.stderr)
                return 2
        made: list[tuple[Subject, mutants.Mutant]] = []
        for subject in subjects:
            found = mutants.mutants_of(subject.migrated, subject.name, replicas=args.replicas, heldout=args.heldout, only=args.kind, max_per_kind=args.max_per_kind)
            made += [(subject, m) for m in found]
        if args.sample is not None:
            made = sampled(made, args.sample)
        counts = Counter((m.kind, m.label) for _, m in made)
        print(f"{len(made)} mutants of {len(subjects)} files: {sum(1 for _, m in made if m.label == mutants.WRONG)} wrong, {sum(1 for _, m in made if m.label == mutants.RIGHT)} right")
        if args.dry or args.verbose:
            for (kind, label), n in sorted(counts.items()):
                print(f"  {label:5} {kind:28} {n}")
        if args.verbose:
            for subject, m in made:
                print(f"  {subject.name} {m.where}: {m.label} {m.kind}: {m.what}")
        if args.dry:
            print(f"all {len(made)} parse ({time.perf_counter() - started:.0f} s)")
            return 0
        originals = {s.name: _place(work, f"original-{i}", s.name, s.original) for i, s in enumerate(subjects)}
        pairs = [(_place(work, f"mutant-{i}", s.name, m.text), originals[s.name]) for i, (s, m) in enumerate(made)]
        results = prove(pairs, args)
        outcomes = [Outcome(s.name, m.kind, m.label, m.family, m.what, m.where, status, message) for (s, m), (status, message) in zip(made, results)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(outcomes)
    print()
    print(render(summary))
    if args.markdown:
        print("\n" + markdown(summary))
    print(f"\n{len(outcomes)} mutants of {len(subjects)} files in {time.perf_counter() - started:.0f} s")
    if args.json:
        record = {"heldout": args.heldout, "replicas": args.replicas, "steps": args.steps, "files": [s.name for s in subjects], "mutants": [asdict(o) | {"verdict": o.verdict} for o in outcomes]}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return exit_status(summary)


def _proven(subjects: list[Subject], work: Path, args) -> list[Subject]:
    """The subjects whose migration the proof proves (the others say why they are left out)."""
    pairs = [(_place(work, f"base-m-{i}", s.name, s.migrated), _place(work, f"base-o-{i}", s.name, s.original)) for i, s in enumerate(subjects)]
    print(f"proving the {len(pairs)} migrations first", file=sys.stderr)
    kept = []
    for subject, (status, message) in zip(subjects, prove(pairs, args)):
        if status == EQUIVALENT:
            kept.append(subject)
        else:
            print(f"left out: {subject.name}: its migration is {status}: {message[:200]}")
    print(f"{len(kept)} of {len(subjects)} migrations proven")
    return kept


if __name__ == "__main__":
    sys.exit(main())
