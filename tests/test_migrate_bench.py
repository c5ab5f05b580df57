"""The migration corpus benchmark: its manifest stays consistent, and its summary counts a file
whose original does not run here apart from the runnable ones (the corpus files themselves are
not in the repository; see bench/migrate/README.md)."""

import importlib.util
import json
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
spec = importlib.util.spec_from_file_location("migrate_bench", BENCH / "migrate.py")
migrate_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(migrate_bench)

MANIFEST = json.loads((BENCH / "migrate" / "manifest.json").read_text(encoding="utf-8"))
PART_C_FILES = 34
FIELDS = {"id", "repo", "path", "commit", "sha256", "kind", "part", "origin", "training", "data", "expect", "why", "notes"}


def test_manifest_records_are_complete_unique_and_in_a_part():
    ids = [r["id"] for r in MANIFEST]
    assert len(ids) == len(set(ids))
    assert len({(r["repo"], r["path"]) for r in MANIFEST}) == len(MANIFEST)
    for record in MANIFEST:
        assert set(record) == FIELDS, record["id"]
        assert record["id"] == record["repo"].replace("/", "__") + "__" + record["path"].replace("/", "__").replace(" ", "_")
        assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and re.fullmatch(r"[0-9a-f]{64}", record["sha256"])
        assert record["kind"] == ("notebook" if record["path"].endswith(".ipynb") else "script")
        assert record["part"] in ("A", "B", "C", "D", "E") and record["expect"] in ("migrate", "refuse")
    parts = {part: [r for r in MANIFEST if r["part"] == part] for part in ("A", "B", "C", "D", "E")}
    assert len(parts["A"]) == 38 and len(parts["B"]) == 17 and len(parts["C"]) == PART_C_FILES and len(parts["D"]) == 32
    assert len(parts["E"]) == 30
    # Part B is code from repositories part A did not hold, mostly.
    new = {r["repo"] for r in parts["B"]} - {r["repo"] for r in parts["A"]}
    assert len(new) >= 5
    # Part C (gathered blind, before the migration was changed for it) holds only repositories A and B do not.
    c_repos = {r["repo"] for r in parts["C"]}
    assert not c_repos & {r["repo"] for r in parts["A"] + parts["B"]} and len(c_repos) >= 20
    # Part D (gathered blind for the round after C) holds only repositories no other part does.
    d_repos = {r["repo"] for r in parts["D"]}
    assert not d_repos & {r["repo"] for r in parts["A"] + parts["B"] + parts["C"]} and len(d_repos) >= 20
    # Part E (gathered blind for a later round) likewise.
    e_repos = {r["repo"] for r in parts["E"]}
    assert not e_repos & {r["repo"] for r in parts["A"] + parts["B"] + parts["C"] + parts["D"]} and len(e_repos) >= 20


def test_the_summary_leaves_files_whose_original_does_not_run_out_of_the_runnable(capsys):
    outcomes = {
        "a.py": {"id": "a.py", "expect": "migrate", "training": "fit", "status": migrate_bench.PROVEN},
        "b.py": {"id": "b.py", "expect": "migrate", "training": "fit", "status": migrate_bench.NOT_MIGRATED, "why": ["a reason"]},
        "c.py": {"id": "c.py", "expect": "migrate", "training": "fit", "status": migrate_bench.NOT_MIGRATED, "why": ["another"],
                 "original_fails": "the script crashed at c.py:3: ModuleNotFoundError: No module named 'pandas'"},
        "d.py": {"id": "d.py", "expect": "migrate", "training": "gan", "status": migrate_bench.ORIGINAL_FAILS, "why": ["pydot"]},
        "e.py": {"id": "e.py", "expect": "refuse", "training": "other", "status": migrate_bench.NOT_MIGRATED, "why": ["by hand"]},
    }
    migrate_bench._print(outcomes, 1.0, static=False)
    out = capsys.readouterr().out
    assert "    the original does not run here either: the script crashed at c.py:3" in out
    assert "not migrated    3 (the original does not run here either: 1)" in out
    assert "expected to migrate: 4; migrated and proven: 1 (25%); of those whose original runs here: 1 of 2 (50%)" in out
    assert "expected to be refused: 1; not migrated: 1" in out


def test_the_summary_sums_up_each_part_apart_when_several_are_measured(capsys):
    outcomes = {
        "a.py": {"id": "a.py", "part": "A", "expect": "migrate", "training": "fit", "status": migrate_bench.PROVEN},
        "c.py": {"id": "c.py", "part": "C", "expect": "migrate", "training": "fit", "status": migrate_bench.NOT_MIGRATED, "why": ["a reason"]},
        "d.py": {"id": "d.py", "part": "C", "expect": "refuse", "training": "other", "status": migrate_bench.NOT_MIGRATED, "why": ["by hand"]},
    }
    migrate_bench._print(outcomes, 1.0, static=False)
    out = capsys.readouterr().out
    assert "expected to migrate: 2; migrated and proven: 1 (50%); of those whose original runs here: 1 of 2 (50%)" in out
    assert "\npart A:\n" in out and "\npart C:\n" in out
    assert "  expected to migrate: 1; migrated and proven: 0 (0%); of those whose original runs here: 0 of 1 (0%)" in out
    assert "  expected to be refused: 1; not migrated: 1" in out
