"""Migrate the migration corpus, and prove every migration by training it beside its original.

    python bench/migrate.py [--files DIR] [--json OUT] [--only TEXT] [--part A|B|C] [--replicas N] [--timeout S] [--static]

For each file of bench/migrate/manifest.json (format: bench/migrate/README.md), runs
``autofix migrate`` (the engine, in this process, default options), checks that every
migration is stable (migrating it again changes nothing) and clean (``check`` finds nothing in
it), then proves every migration with ``autofix smoke MIGRATED --compare ORIGINAL`` on N
replicas (2 logical CPUs; synthetic ``keras.datasets``), all pairs in one TensorFlow process
(``compare_many``). Each file is one of:

- migrated and proven: the same first update as its original (on N replicas at N x its batch,
  on one replica at its batch);
- migrated but failed: the migration computes something else, fails where the original runs,
  is unstable, or ``check`` finds something in it. Must be 0;
- migrated, inconclusive: the runs could not be held equal closely enough to prove or
  disprove it (BatchNormalization statistics: 0.3% apart, where a wrong migration is 2 x);
- not migrated, with the reason autofix gives (and, when the original does not run here
  either, why: such a file could not be proven whatever autofix did, and is not counted among
  those whose original runs);
- original fails: the original script does not run here, for reasons that have nothing to do
  with distribution (an API Keras 3 removed, a package this Python lacks, a GPU it asserts):
  said, not counted as a failure;
- skipped: autofix finds no training in it.

The corpus files are not in the repository (see bench/migrate/README.md): DIR defaults to
$AUTOFIX_MIGRATE_CORPUS, else bench/migrate/files. ``--static`` migrates without training
(no TensorFlow needed). Exit status: 0 when no migration failed, 1 otherwise, 2 when the corpus
cannot be found.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "migrate" / "manifest.json"
sys.path.insert(0, str(HERE.parent / "src"))

from autofix.engine import Options, process_notebook, process_text  # noqa: E402

PROVEN, FAILED, NOT_MIGRATED, ORIGINAL_FAILS, SKIPPED = "proven", "failed", "not migrated", "original fails", "skipped"
# Migrated, but the runs could not be held equal closely enough to prove or disprove it
# (BatchNormalization: 0.3% apart where a wrong migration is 2 x; see docs/smoke.md).
INCONCLUSIVE = "inconclusive"


def migrate(text: str, path: str, options: Options):
    process = process_notebook if path.endswith(".ipynb") else process_text
    return process(text, path, options)


def reasons(result) -> list[str]:
    """Why a file was not migrated: the reasons of its findings that are not fixed."""
    found = []
    for finding in result.findings:
        if finding.fixable or not finding.reason:
            continue
        where = f"cell {finding.cell_number}, line {finding.line}" if finding.cell is not None else f"line {finding.line}"
        found.append(f"{where}: {finding.message}: {finding.reason.removeprefix('no automatic fix: ')}")
    return found or [result.refused or result.error or "no migration"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", help="the corpus folder (default: $AUTOFIX_MIGRATE_CORPUS, else bench/migrate/files)")
    parser.add_argument("--json", help="also write every file's outcome here")
    parser.add_argument("--only", action="append", default=[], help="only files whose id contains this (repeatable)")
    parser.add_argument("--part", action="append", default=[], help="only the files of this part of the corpus (repeatable: A, B, C)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each run may take (default 300: ResNet50 on 2 logical CPUs takes 3 minutes)")
    parser.add_argument("--static", action="store_true", help="migrate and check, but do not train")
    args = parser.parse_args(argv)
    folder = Path(args.files or os.environ.get("AUTOFIX_MIGRATE_CORPUS") or HERE / "migrate" / "files")
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    if args.only:
        manifest = [r for r in manifest if any(o in r["id"] for o in args.only)]
    if args.part:
        manifest = [r for r in manifest if r.get("part", "A") in args.part]
    missing = [r["id"] for r in manifest if not (folder / r["id"]).is_file()]
    if len(missing) == len(manifest):
        print(f"no corpus files in {folder}: see bench/migrate/README.md", file=sys.stderr)
        return 2
    options = Options(migrate="mirrored")
    plain = Options()
    outcomes: dict[str, dict] = {}
    pairs = []
    work = Path(tempfile.mkdtemp(prefix="autofix-bench-migrate-"))
    started = time.perf_counter()
    try:
        for number, record in enumerate(manifest):
            ident = record["id"]
            outcome = outcomes[ident] = {"id": ident, "part": record.get("part", "A"), "expect": record["expect"], "training": record["training"]}
            path = folder / ident
            if not path.is_file():
                outcome.update(status=NOT_MIGRATED, why=["the file is missing"])
                continue
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != record["sha256"]:
                outcome["note"] = "its sha256 differs from the manifest's"
            text = data.decode("utf-8")
            result = migrate(text, ident, options)
            if result.new_text is None:
                if result.skipped:
                    outcome.update(status=SKIPPED, why=[result.skipped])
                else:
                    outcome.update(status=NOT_MIGRATED, why=reasons(result))
                continue
            again = migrate(result.new_text, ident, options)
            check = migrate(result.new_text, ident, plain)
            problems = []
            if again.new_text is not None:
                problems.append("migrating the migrated file changes it again")
            left = [f for f in check.findings if not f.suppressed and not f.unsafe]
            if left:
                problems.append(f"check finds {len(left)} finding(s) in it: " + "; ".join(f"{f.code} line {f.line}: {f.message}" for f in left))
            outcome["changed_lines"] = _changed_lines(text, result.new_text)
            if problems:
                outcome.update(status=FAILED, why=problems)
                continue
            outcome["status"] = "migrated"
            pair_dir = work / str(number)
            (pair_dir / "original").mkdir(parents=True)
            (pair_dir / "migrated").mkdir(parents=True)
            original, migrated = pair_dir / "original" / ident, pair_dir / "migrated" / ident
            original.write_bytes(data)
            migrated.write_text(result.new_text, encoding="utf-8")
            pairs.append((ident, str(migrated), str(original)))
        if pairs and not args.static:
            from autofix.smoke import ComparePair, compare_many

            reports = compare_many([ComparePair(m, o) for _, m, o in pairs], replicas=args.replicas, timeout=args.timeout, offline=True)
            for (ident, _, _), report in zip(pairs, reports):
                compare = report.compare
                outcome = outcomes[ident]
                status = compare.status if compare is not None else "harness-error"
                outcome["compare"] = status
                outcome["compare_message"] = compare.message if compare is not None else report.harness_error
                outcome["notes"] = [n for n in report.notes if "not installed" in n]
                if status == "equivalent":
                    outcome["status"] = PROVEN
                elif status == "original-fails":
                    outcome["status"] = ORIGINAL_FAILS
                    outcome["why"] = [compare.message if compare is not None else ""]
                elif status == "inconclusive":
                    outcome["status"] = INCONCLUSIVE
                    outcome["why"] = [outcome["compare_message"]]
                else:
                    outcome["status"] = FAILED
                    outcome["why"] = [f"{status}: {outcome['compare_message']}"]
        if not args.static:
            _run_unmigrated_originals(outcomes, folder, work, args.replicas, args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - started
    _print(outcomes, seconds, args.static)
    if args.json:
        Path(args.json).write_text(json.dumps(list(outcomes.values()), indent=1) + "\n", encoding="utf-8")
    return 1 if any(o["status"] == FAILED for o in outcomes.values()) else 0


def _run_unmigrated_originals(outcomes: dict[str, dict], folder: Path, work: Path, replicas: int, timeout: float) -> None:
    """Runs, up to its first update, the original of every file expected to migrate that was
    not, and notes when it does not run here either (a package or an API this Python lacks)."""
    from autofix.smoke.compare import reference_failure
    from autofix.smoke.harness import run_many
    from autofix.smoke.jobs import Recording, SmokeJob

    waiting = [o for o in outcomes.values() if o["status"] == NOT_MIGRATED and o["expect"] == "migrate" and (folder / o["id"]).is_file()]
    jobs = []
    for number, outcome in enumerate(waiting):
        place = work / f"unmigrated-{number}"
        place.mkdir(parents=True)
        shutil.copyfile(folder / outcome["id"], place / outcome["id"])
        jobs.append(SmokeJob(str(place / outcome["id"]), replicas=1, recording=Recording(str(place / "steps.npz"))))
    if not jobs:
        return
    for outcome, report in zip(waiting, run_many(jobs, replicas=replicas, steps=1, timeout=timeout, offline=True)):
        failure = report.harness_error or reference_failure(report)
        if failure:
            outcome["original_fails"] = failure


def _changed_lines(before: str, after: str) -> int:
    import difflib

    return sum(1 for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="") if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def _print(outcomes: dict[str, dict], seconds: float, static: bool) -> None:
    for outcome in outcomes.values():
        status = outcome["status"]
        print(f"{status:15} expect {outcome['expect']:8} {outcome['training']:12} {outcome['id']}")
        for why in outcome.get("why", ()):
            print(f"    {why}")
        if outcome.get("original_fails"):
            print(f"    the original does not run here either: {outcome['original_fails']}")
        for note in outcome.get("notes", ()):
            print(f"    note: {note}")
    print()
    print(f"{len(outcomes)} files in {seconds:.0f} s" + (" (static: not trained)" if static else ""))
    _summary(list(outcomes.values()))
    parts = sorted({o.get("part", "A") for o in outcomes.values()})
    if len(parts) > 1:
        # A part gathered later is code the tool was not tuned on: each is summed up apart as well.
        for part in parts:
            print(f"\npart {part}:")
            _summary([o for o in outcomes.values() if o.get("part", "A") == part], indent="  ")


def _summary(outcomes: list[dict], indent: str = "") -> None:
    counts = Counter(o["status"] for o in outcomes)
    expected = [o for o in outcomes if o["expect"] == "migrate"]
    runnable = [o for o in expected if o["status"] != ORIGINAL_FAILS and not o.get("original_fails")]
    proven = sum(1 for o in expected if o["status"] == PROVEN)
    refused_right = sum(1 for o in outcomes if o["expect"] == "refuse" and o["status"] in (NOT_MIGRATED, SKIPPED))
    for status in (PROVEN, INCONCLUSIVE, "migrated", FAILED, NOT_MIGRATED, ORIGINAL_FAILS, SKIPPED):
        if counts[status]:
            unrunnable = sum(1 for o in outcomes if o["status"] == status and o.get("original_fails"))
            print(f"{indent}  {status:15} {counts[status]}" + (f" (the original does not run here either: {unrunnable})" if unrunnable else ""))
    print(
        f"{indent}expected to migrate: {len(expected)}; migrated and proven: {proven} ({_pct(proven, len(expected))}); "
        f"of those whose original runs here: {proven} of {len(runnable)} ({_pct(proven, len(runnable))})"
    )
    refuse = sum(1 for o in outcomes if o["expect"] == "refuse")
    print(f"{indent}expected to be refused: {refuse}; not migrated: {refused_right}")


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


if __name__ == "__main__":
    sys.exit(main())
