"""autofix on whole training programs spread over a repository's modules.

    python bench/repos.py [--files DIR] [--json OUT] [--only TEXT] [--kind migrate|distributed]
                          [--prove] [--replicas N] [--timeout S] [--python PY]

For each record of bench/repos/manifest.json (format: bench/repos/README.md), on a fresh copy of
its tree (``DIR/<id>``, made by ``python bench/repos/fetch.py``):

- kind ``distributed`` (code that already uses a strategy): ``autofix check --format json`` on
  the tree, as a user would run it (default options), compared with the bugs triaged by hand:
  every finding is true (it points at a triaged bug, or bench/repos/triage.json says so), false,
  or untriaged (listed, for a person to judge); recall is split by where a bug's evidence lies
  (``same-module``: visible in the file reported; ``other-module``: only through another
  module). ``autofix fix`` runs on another copy: each file it changes is judged by the sha256 of
  its new bytes (triage.json), or listed as untriaged.
- kind ``migrate`` (single-device code): ``autofix migrate --write`` on a copy: migrated (the
  files it changed), declined (the reasons it gave), or silent (nothing migrated and nothing
  said: a miss when the record is expected to migrate). With ``--prove``, every migration is
  trained beside its original as ``autofix smoke ENTRY --compare ORIGINAL`` does (each tree in a
  folder of its own; see ``prove``): proven, broken (it fails or computes something else),
  inconclusive, or not provable because the original does not run here either.

The CLI is run as a subprocess of ``--python`` (default: this Python) with ``-m autofix``;
standard library otherwise (``--prove`` imports autofix's smoke harness, which needs
TensorFlow). Exit status: 0 when nothing is untriaged, no fix is wrong, no migration is broken
and no tree is missing or corrupted; 1 otherwise; 2 when the corpus cannot be found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "repos" / "manifest.json"
TRIAGE = HERE / "repos" / "triage.json"
EVIDENCE = ("same-module", "other-module")
KINDS = ("migrate", "distributed")

# Migration outcomes.
MIGRATED, DECLINED, SILENT = "migrated", "declined", "silent"
PROVEN, BROKEN, INCONCLUSIVE, ORIGINAL_FAILS = "proven", "broken", "inconclusive", "original fails"


# --- Trees ---------------------------------------------------------------------------------

def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_problems(record: dict, folder: Path) -> tuple[list[str], list[str]]:
    """The record's files missing from ``folder/<id>`` and those whose sha256 differs."""
    missing, corrupted = [], []
    for item in record["files"]:
        path = folder / record["id"] / item["path"]
        if not path.is_file():
            missing.append(item["path"])
        elif sha256(path.read_bytes()) != item["sha256"]:
            corrupted.append(item["path"])
    return missing, corrupted


def copy_tree(record: dict, folder: Path, target: Path) -> Path:
    """A fresh copy of the record's files (and only those) at ``target``."""
    for item in record["files"]:
        destination = target / item["path"]
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / record["id"] / item["path"], destination)
    return target


def snapshot(tree: Path) -> dict[str, bytes]:
    """Every file of ``tree`` by its path under it (``/`` separated)."""
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def changed_files(before: dict[str, bytes], tree: Path, only: set[str] | None = None) -> dict[str, bytes]:
    """The files of ``tree`` whose bytes differ from ``before`` (new files included), by path."""
    after = snapshot(tree)
    return {path: data for path, data in after.items()
            if (only is None or path in only) and before.get(path) != data}


# --- Running the CLI -----------------------------------------------------------------------

def autofix(python: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``autofix ARGS .`` in ``cwd`` (``python -m autofix``) with the default options: no cache,
    no ``[tool.autofix]`` table (``--isolated``)."""
    env = dict(os.environ)
    env.pop("AUTOFIX_CACHE_DIR", None)
    env["AUTOFIX_NO_CACHE"] = "1"
    command, *rest = args
    return subprocess.run([python, "-m", "autofix", command, "--isolated", *rest], cwd=cwd, capture_output=True, text=True, env=env)


def _path(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def check(python: str, tree: Path) -> tuple[list[dict], list[dict]]:
    """``autofix check --format json .`` in ``tree``: its findings and its errors."""
    done = autofix(python, ["check", "--format", "json", "--exit-zero", "."], tree)
    try:
        items = json.loads(done.stdout or "[]")
    except ValueError:
        return [], [{"file": ".", "error": f"check gave no JSON (exit {done.returncode}): {done.stderr.strip()[-500:]}"}]
    findings = [{"file": _path(i["path"]), "line": i["line"], "cell": i.get("cell_index"), "code": i["code"],
                 "message": i["message"], "unsafe": bool(i.get("unsafe")), "fixable": bool(i.get("fixable")),
                 "reason": i.get("reason")} for i in items if "error" not in i]
    errors = [{"file": _path(i["path"]), "error": i["error"]} for i in items if "error" in i]
    return findings, errors


def fix(python: str, tree: Path) -> dict[str, bytes]:
    """``autofix fix .`` in ``tree``: the files it changed, with their new bytes."""
    before = snapshot(tree)
    autofix(python, ["fix", "."], tree)
    return changed_files(before, tree, set(before))


def migrate(python: str, tree: Path) -> tuple[dict[str, bytes], list[str], list[dict]]:
    """``autofix migrate --write .`` in ``tree``: the files it changed (new bytes), what it said
    on standard error (why it left files alone), and its findings as ``--format json`` reports
    them (with the reason of each one not fixed)."""
    report = tree.parent / f"{tree.name}-migrate.json"
    autofix(python, ["migrate", "--format", "json", "-o", str(report), "."], tree)
    try:
        items = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        items = []
    before = snapshot(tree)
    done = autofix(python, ["migrate", "--write", "."], tree)
    said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(("Checked ", "migrated "))]
    return changed_files(before, tree, set(before)), said, items


# --- Distributed code: findings, bugs and fixes --------------------------------------------

def bug_sites(bug: dict) -> list[tuple[str, int, int]]:
    """Where a finding of the bug's rule counts as reporting it: (file, first line, last line)."""
    first, last = bug.get("lines") or (bug["line"], bug["line"])
    sites = [(bug["file"], first, last)]
    for site in bug.get("sites", ()):
        a, b = site.get("lines") or (site["line"], site["line"])
        sites.append((site["file"], a, b))
    return sites


def matching_bug(finding: dict, bugs: list[dict]) -> int | None:
    for number, bug in enumerate(bugs):
        if bug["code"] != finding["code"]:
            continue
        if any(finding["file"] == file and first <= finding["line"] <= last for file, first, last in bug_sites(bug)):
            return number
    return None


def judge_distributed(record: dict, findings: list[dict], errors: list[dict], fixed: dict[str, bytes], triage: dict) -> dict:
    """One distributed record: every finding judged (by the bugs, then the triage), the bugs
    reported or not, every changed file judged."""
    ident = record["id"]
    bugs = record.get("bugs", [])
    verdicts = {(f["id"], f["file"], f["line"], f["code"]): f for f in triage.get("findings", [])}
    fix_verdicts = {(f["id"], f["file"], f["sha256"]): f for f in triage.get("fixes", [])}
    judged: list[dict] = []
    reported: set[int] = set()
    for finding in findings:
        item = dict(finding)
        bug = matching_bug(finding, bugs)
        if bug is not None:
            reported.add(bug)
        if finding["unsafe"]:
            item["verdict"] = "suggestion"
        elif bug is not None:
            item.update(verdict="true", why=f"reports bug {bug + 1}: {bugs[bug]['why']}")
        else:
            verdict = verdicts.get((ident, finding["file"], finding["line"], finding["code"]))
            item.update(verdict=verdict["verdict"], why=verdict.get("why", "")) if verdict else item.update(verdict="untriaged")
        judged.append(item)
    fixes = []
    for path, data in sorted(fixed.items()):
        digest = sha256(data)
        verdict = fix_verdicts.get((ident, path, digest))
        fixes.append({"file": path, "sha256": digest, "verdict": verdict["verdict"] if verdict else "untriaged",
                      "why": verdict.get("why", "") if verdict else "",
                      "findings": [[f["line"], f["code"]] for f in findings if f["file"] == path and f["fixable"]]})
    return {
        "id": ident, "kind": "distributed", "findings": judged, "errors": errors, "fixes": fixes,
        "bugs": [dict(bug, reported=n in reported) for n, bug in enumerate(bugs)],
    }


# --- Single-device code: migrations --------------------------------------------------------

def judge_migration(record: dict, changed: dict[str, bytes], said: list[str], items: list[dict]) -> dict:
    """One migrate record: migrated (which files), declined (the reasons), or silent."""
    # What the CLI said on standard error (each finding it did not fix, with its reason; a
    # refused migration; an error), else the reasons its JSON report gives.
    reasons = list(said) or [
        f"{_path(i['path'])}:{i['line']}: {i['code']} {i['message']}: {i['reason']}"
        for i in items if "error" not in i and not i.get("fixable") and i.get("reason")
    ] + [f"{_path(i['path'])}: error: {i['error']}" for i in items if "error" in i]
    if changed:
        status, why = MIGRATED, []
    elif reasons:
        status, why = DECLINED, reasons
    else:
        status, why = SILENT, ["autofix migrate changed nothing and said nothing"]
    return {"id": record["id"], "kind": "migrate", "expect": record["expect"], "status": status,
            "changed": sorted(changed), "why": why, "reasons": reasons}


def prove(original: Path, migrated: Path, entry: str, replicas: int, timeout: float) -> tuple[str, str]:
    """What ``autofix smoke MIGRATED/ENTRY --compare ORIGINAL/ENTRY`` does, with the original's
    two runs and the migration's two runs each in a process of their own, with their own tree's
    root on ``PYTHONPATH`` (the repository's modules are imported from there, as the entry
    expects when run from the root). In one process the second tree would be handed the first
    tree's modules, which stay imported when they sit outside the entry's folder."""
    from autofix.smoke.compare import ComparePair, _accumulated, _jobs, judge
    from autofix.smoke.harness import run_many

    saved = os.environ.get("PYTHONPATH")
    steps = 1

    def runs(jobs: list, root: Path) -> list:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), saved) if p)
        try:
            return run_many(jobs, replicas=replicas, steps=steps, timeout=timeout, offline=True)
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved

    def compared(floatx: str | None):
        # The four runs of ``smoke --compare`` (the original, its reference on N virtual
        # replicas, the migration on N and on 1), the original's in its tree, the migration's in
        # its own.
        prefix = str(migrated.parent / f"first-update-{floatx or 'float32'}")
        pair = ComparePair(str(migrated / entry), str(original / entry))
        o1, on, mn, m1 = _jobs(pair, replicas, steps, prefix, floatx)
        r_o1, r_on = runs([o1, on], original)
        if r_on.status == "unsplittable":  # its step cannot be split into replicas: micro-steps
            (r_on,) = runs([_accumulated(pair, replicas, steps, prefix, floatx)], original)
        r_mn, r_m1 = runs([mn, m1], migrated)
        return judge(str(original / entry), r_o1, r_on, r_mn, r_m1, replicas)

    verdict = compared(None)
    if verdict.status != "equivalent" and getattr(verdict, "rounding", False):
        # float32's rounding, magnified (BatchNormalization, Adam's first update): again in
        # float64, as the smoke harness does; only a proof is taken from it.
        wide = compared("float64")
        if wide.status == "equivalent":
            return PROVEN, f"in float64: {wide.message} (in float32: {verdict.message})"
    status = {"equivalent": PROVEN, "original-fails": ORIGINAL_FAILS, "inconclusive": INCONCLUSIVE}.get(verdict.status, BROKEN)
    return status, f"{verdict.status}: {verdict.message}"


# --- Measuring -----------------------------------------------------------------------------

def measure(manifest: list[dict], triage: dict, folder: Path, python: str, prove_them: bool = False,
            replicas: int = 2, timeout: float = 300.0, log=print) -> dict:
    """Run autofix on every record's tree and judge what it does; the report (``show`` prints it)."""
    report: dict = {"records": [], "missing": [], "corrupted": []}
    work = Path(tempfile.mkdtemp(prefix="autofix-bench-repos-"))
    started = time.perf_counter()
    try:
        for number, record in enumerate(manifest):
            ident = record["id"]
            missing, corrupted = tree_problems(record, folder)
            if missing or corrupted:
                report["missing"] += [f"{ident}/{p}" for p in missing]
                report["corrupted"] += [f"{ident}/{p}" for p in corrupted]
                report["records"].append({"id": ident, "kind": record["kind"], "status": "missing",
                                          "expect": record.get("expect"), "bugs": record.get("bugs", [])})
                continue
            log(f"[{number + 1}/{len(manifest)}] {ident} ({record['kind']})")
            place = work / str(number)
            if record["kind"] == "distributed":
                findings, errors = check(python, copy_tree(record, folder, place / "check"))
                fixed = fix(python, copy_tree(record, folder, place / "fix"))
                report["records"].append(judge_distributed(record, findings, errors, fixed, triage))
            else:
                tree = copy_tree(record, folder, place / "migrated")
                changed, said, items = migrate(python, tree)
                outcome = judge_migration(record, changed, said, items)
                if prove_them and outcome["status"] == MIGRATED:
                    original = copy_tree(record, folder, place / "original")
                    try:
                        outcome["proof"], outcome["proof_message"] = prove(original, tree, record["entry"], replicas, timeout)
                    except Exception as exc:  # the harness itself failed: said, counted as broken
                        outcome["proof"], outcome["proof_message"] = BROKEN, f"the harness failed: {exc!r}"
                report["records"].append(outcome)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["summary"] = summarise(report["records"], proved=prove_them)
    return report


def summarise(records: list[dict], proved: bool = False) -> dict:
    """The figures: per kind, and the lists a person reads (untriaged, wrong, broken)."""
    migrations = [r for r in records if r["kind"] == "migrate" and r.get("status") != "missing"]
    expected = [r for r in migrations if r.get("expect") == "migrate"]
    refuse = [r for r in migrations if r.get("expect") == "refuse"]
    outcome = Counter()
    for r in migrations:
        if r["status"] == MIGRATED and proved:
            outcome[r.get("proof", BROKEN)] += 1
        else:
            outcome[r["status"]] += 1
    migrate = {
        "records": len(migrations),
        "expected_to_migrate": len(expected),
        "expected_to_refuse": len(refuse),
        "migrated": sum(r["status"] == MIGRATED for r in migrations),
        "proven": outcome[PROVEN],
        "broken": outcome[BROKEN],
        "inconclusive": outcome[INCONCLUSIVE],
        "original_fails": outcome[ORIGINAL_FAILS],
        "declined": outcome[DECLINED],
        "silent": outcome[SILENT],
        "silent_misses": sum(r["status"] == SILENT for r in expected),
        "expected_migrate_proven": sum(r.get("proof") == PROVEN for r in expected),
        "expected_migrate_migrated": sum(r["status"] == MIGRATED for r in expected),
        "expected_migrate_declined": sum(r["status"] == DECLINED for r in expected),
        "expected_refuse_not_migrated": sum(r["status"] != MIGRATED for r in refuse),
        "expected_refuse_migrated": sum(r["status"] == MIGRATED for r in refuse),
    }

    distributed = [r for r in records if r["kind"] == "distributed" and r.get("status") != "missing"]
    per_rule: dict[str, Counter] = defaultdict(Counter)
    for r in distributed:
        for f in r["findings"]:
            c = per_rule[f["code"]]
            c["suggestions" if f["verdict"] == "suggestion" else "findings"] += 1
            if f["verdict"] in ("true", "false", "untriaged"):
                c[f["verdict"]] += 1
    rules = {}
    for code in sorted(per_rule):
        c = per_rule[code]
        judged = c["true"] + c["false"]
        rules[code] = {"findings": c["findings"], "true": c["true"], "false": c["false"], "untriaged": c["untriaged"],
                       "suggestions": c["suggestions"], "precision": round(c["true"] / judged, 3) if judged else None}
    total = Counter()
    for c in per_rule.values():
        total.update({k: c[k] for k in ("findings", "true", "false", "untriaged", "suggestions")})
    judged = total["true"] + total["false"]
    recall = {}
    for evidence in EVIDENCE:
        bugs = [b for r in distributed for b in r["bugs"] if b.get("evidence") == evidence]
        found = sum(b["reported"] for b in bugs)
        recall[evidence] = {"bugs": len(bugs), "reported": found, "recall": round(found / len(bugs), 3) if bugs else None}
    fixes = Counter(f["verdict"] for r in distributed for f in r["fixes"])
    return {
        "migrate": migrate,
        "distributed": {
            "records": len(distributed),
            "with_bugs": sum(bool(r["bugs"]) for r in distributed),
            "findings": total["findings"], "true": total["true"], "false": total["false"], "untriaged": total["untriaged"],
            "suggestions": total["suggestions"], "precision": round(total["true"] / judged, 3) if judged else None,
            "rules": rules, "recall": recall,
            "fixes": {"files_changed": sum(fixes.values()), "correct": fixes["correct"], "wrong": fixes["wrong"], "untriaged": fixes["untriaged"]},
            "errors": sum(len(r["errors"]) for r in distributed),
        },
        "untriaged_findings": [dict(f, id=r["id"]) for r in distributed for f in r["findings"] if f["verdict"] == "untriaged"],
        "untriaged_fixes": [dict(f, id=r["id"]) for r in distributed for f in r["fixes"] if f["verdict"] == "untriaged"],
        "wrong_fixes": [dict(f, id=r["id"]) for r in distributed for f in r["fixes"] if f["verdict"] == "wrong"],
        "broken_migrations": [r for r in migrations if r.get("proof") == BROKEN],
        "missed_bugs": [dict(b, id=r["id"]) for r in distributed for b in r["bugs"] if not b["reported"]],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def show(report: dict, out=print) -> None:
    s = report["summary"]
    m, d = s["migrate"], s["distributed"]
    out(f"\n{len(report['records'])} records in {report.get('seconds', 0):.0f} s; missing files {len(report['missing'])}, corrupted {len(report['corrupted'])}")
    out("\nsingle-device code (autofix migrate):")
    for r in report["records"]:
        if r["kind"] != "migrate" or r.get("status") == "missing":
            continue
        shown = r.get("proof") or r["status"]
        out(f"  {shown:15} expect {r['expect']:8} {r['id']}" + (f"  [{', '.join(r['changed'])}]" if r["changed"] else ""))
        for line in r["why"][:6] + ([r["proof_message"]] if r.get("proof_message") and r.get("proof") != PROVEN else []):
            out(f"      {line}")
    out(f"  records {m['records']} (expected to migrate {m['expected_to_migrate']}, to be refused {m['expected_to_refuse']})")
    out(f"  migrated {m['migrated']}: proven {m['proven']}, broken {m['broken']}, inconclusive {m['inconclusive']}, original fails here {m['original_fails']}")
    out(f"  declined with a reason {m['declined']}; silent {m['silent']} (silent misses, expected to migrate: {m['silent_misses']})")
    out(f"  expected to migrate: migrated {m['expected_migrate_migrated']}, proven {m['expected_migrate_proven']}, declined {m['expected_migrate_declined']}, silent {m['silent_misses']}")
    out(f"  expected to be refused: not migrated {m['expected_refuse_not_migrated']}, migrated {m['expected_refuse_migrated']}")

    out("\ncode that already distributes (autofix check / fix):")
    out(f"  records {d['records']} ({d['with_bugs']} with bugs); findings {d['findings']}: true {d['true']}, false {d['false']}, untriaged {d['untriaged']}; precision {_pct(d['precision'])}; suggestions {d['suggestions']}; errors {d['errors']}")
    for code, r in d["rules"].items():
        out(f"    {code}: findings {r['findings']}, true {r['true']}, false {r['false']}, untriaged {r['untriaged']}, precision {_pct(r['precision'])}, suggestions {r['suggestions']}")
    for evidence, r in d["recall"].items():
        out(f"  recall on {evidence} bugs: {r['reported']} of {r['bugs']} ({_pct(r['recall'])})")
    fx = d["fixes"]
    out(f"  fixes: {fx['files_changed']} files changed; correct {fx['correct']}, wrong {fx['wrong']}, untriaged {fx['untriaged']}")

    sections = [
        ("missing files", [{"x": p} for p in report["missing"]], "{x}"),
        ("corrupted files (sha256 differs from the manifest)", [{"x": p} for p in report["corrupted"]], "{x}"),
        ("broken migrations", s["broken_migrations"], "{id}: {proof_message}"),
        ("wrong fixes", s["wrong_fixes"], "{id}/{file}: {why}"),
        ("untriaged fixes", s["untriaged_fixes"], "{id}/{file} sha256={sha256} fixable findings={findings}"),
        ("untriaged findings", s["untriaged_findings"], "{id}/{file}:{line}: {code} {message}"),
        ("bugs not reported", s["missed_bugs"], "{id}/{file}:{line}: {code} ({evidence}) {why}"),
    ]
    for title, items, fmt in sections:
        if items:
            out(f"\n{title}:")
            for item in items:
                out("  " + fmt.format(**item))


def failed(report: dict) -> bool:
    s = report["summary"]
    return bool(report["missing"] or report["corrupted"] or s["untriaged_findings"] or s["untriaged_fixes"]
                or s["wrong_fixes"] or s["broken_migrations"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", help="folder holding the trees (default: $AUTOFIX_REPOS_CORPUS, else bench/repos/files)")
    parser.add_argument("--manifest", default=str(MANIFEST), help="the manifest (default: bench/repos/manifest.json)")
    parser.add_argument("--triage", default=str(TRIAGE), help="the triage (default: bench/repos/triage.json)")
    parser.add_argument("--json", help="also write the whole report as JSON to this file")
    parser.add_argument("--only", action="append", default=[], help="only records whose id contains this (repeatable)")
    parser.add_argument("--kind", action="append", choices=KINDS, help="only records of this kind (repeatable)")
    parser.add_argument("--prove", action="store_true", help="train every migration beside its original (needs TensorFlow)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each run may take when proving")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs autofix (-m autofix); default: this one")
    args = parser.parse_args(argv)

    folder = Path(args.files or os.environ.get("AUTOFIX_REPOS_CORPUS") or HERE / "repos" / "files")
    if not folder.is_dir():
        print(f"corpus folder {folder} not found; get the trees with: python bench/repos/fetch.py "
              "(or point --files / $AUTOFIX_REPOS_CORPUS at them)", file=sys.stderr)
        return 2
    manifest = json.loads(Path(args.manifest).read_text(encoding="utf-8"))
    triage_path = Path(args.triage)
    triage = json.loads(triage_path.read_text(encoding="utf-8")) if triage_path.is_file() else {}
    if args.only:
        manifest = [r for r in manifest if any(o in r["id"] for o in args.only)]
    if args.kind:
        manifest = [r for r in manifest if r["kind"] in args.kind]
    report = measure(manifest, triage, folder, args.python, args.prove, args.replicas, args.timeout)
    show(report)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
