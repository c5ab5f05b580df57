"""The result cache: a warm run answers what a cold run answers, analysing only what changed.

Every test compares the cached answer with the same command run with ``--no-cache``; files
analysed are counted by wrapping the engine (``-j 1`` runs it in this process).
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix import cache, engine, registry
from autofix.cli import main
from autofix.engine import Options, process_text
from autofix.rule import Rule
from conftest import BROKEN
from fixturecases import FIXTURES, ROOT

HELPER_USER = (
    "import tensorflow as tf\n"
    "from helpers import build_model, BATCH\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = build_model()\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "dataset = tf.data.Dataset.range(10).batch(BATCH)\n"
    "model.fit(dataset)\n"
)
HELPERS = (
    "import tensorflow as tf\n"
    "BATCH = 64\n"
    "def build_model():\n"
    "    return tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    for name in ("fit_batch_size.py", "literal_batch.py"):
        shutil.copyfile(FIXTURES / "tfd002" / name, tmp_path / name)
    shutil.copyfile(FIXTURES / "notebooks" / "train.ipynb", tmp_path / "explore.ipynb")
    (tmp_path / "clean.py").write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    (tmp_path / "unrelated.py").write_text("print('no strategy here')\n")
    (tmp_path / "broken_syntax.py").write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy(\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    result = CliRunner().invoke(main, [*args, "-j", "1"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def analysed_by(counter: list[int], *args: str):
    before = len(counter)
    outcome = run(*args)
    return outcome, len(counter) - before


def test_a_warm_check_answers_as_a_cold_one_without_analysing(repo, cached):
    cold, first = analysed_by(cached, "check", ".")
    warm, second = analysed_by(cached, "check", ".")
    assert first == 7
    assert second == 0
    assert warm == cold == run("check", "--no-cache", ".")
    assert cold[0] == 2  # the syntax error is an answer too, and cached


def test_an_edited_file_is_analysed_again_and_answers_for_its_new_text(repo, cached):
    run("check", ".")
    text = (repo / "fit_batch_size.py").read_text()
    (repo / "fit_batch_size.py").write_text(text.replace("batch_size=32", "batch_size=32 * strategy.num_replicas_in_sync"))
    # (Entries are found by content: the same bytes as train.py would be a hit, rightly.)
    (repo / "clean.py").write_text(BROKEN + "# now broken too\n")
    warm, count = analysed_by(cached, "check", ".")
    assert count == 2
    assert warm == run("check", "--no-cache", ".")
    assert "clean.py:4:9: TFD001" in warm[1]


@pytest.mark.parametrize(
    "first, second",
    [
        (["check"], ["check", "--select", "TFD002"]),
        (["check", "--select", "TFD002"], ["check", "--ignore", "TFD002"]),
        (["check"], ["check", "--format", "json"]),
        (["check", "--format", "json"], ["diff"]),
        (["check"], ["check", "--select", "TFD001,TFD005"]),
        (["check", "--select", "TFD001,TFD005"], ["check", "--select", "TFD001,TFD005", "--unsafe-fixes"]),
        (["check"], ["check", "--unused-suppressions"]),
        (["diff"], ["diff", "--cells"]),
    ],
)
def test_options_that_change_answers_are_in_the_key(repo, cached, first, second):
    run(*first, ".")
    assert run(*second, ".") == run(*second, "--no-cache", ".")


def test_per_file_ignores_are_in_the_key(repo, cached):
    (repo / "pyproject.toml").write_text('[tool.autofix]\nper-file-ignores = {"train.py" = ["TFD001"]}\n')
    with_ignores = run("check", ".")
    assert "train.py" not in with_ignores[1]
    (repo / "pyproject.toml").write_text("[tool.autofix]\n")
    assert run("check", ".") == run("check", "--no-cache", ".")
    assert "train.py:4:9: TFD001" in run("check", ".")[1]


def test_the_cache_folder_ignores_itself_at_the_project_root(repo, cached):
    (repo / "pyproject.toml").write_text("[tool.autofix]\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "train.py").write_text(BROKEN)
    os.chdir(repo / "sub")
    run("check", ".")
    folder = repo / cache.DEFAULT_NAME
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert not (repo / "sub" / cache.DEFAULT_NAME).exists()
    # git agrees that nothing in it is to be committed.
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True, text=True)
        assert cache.DEFAULT_NAME not in status.stdout


def test_no_cache_and_the_environment_choose_the_folder(repo, cached, monkeypatch, tmp_path_factory):
    run("check", "--no-cache", ".")
    assert not (repo / cache.DEFAULT_NAME).exists()
    monkeypatch.setenv(cache.ENV_OFF, "1")
    run("check", ".")
    assert not (repo / cache.DEFAULT_NAME).exists()
    monkeypatch.delenv(cache.ENV_OFF)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.setenv(cache.ENV_DIR, str(elsewhere / "c"))
    run("check", ".")
    assert (elsewhere / "c" / ".gitignore").exists() and not (repo / cache.DEFAULT_NAME).exists()
    run("check", "--cache-dir", str(elsewhere / "d"), ".")
    assert (elsewhere / "d" / ".gitignore").exists()


def _git_lists(folder: Path) -> set[str]:
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=folder, capture_output=True, text=True)
    return {line[3:] for line in status.stdout.splitlines()}


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_cache_folder_named_where_code_is_keeps_to_a_folder_of_its_own(repo, cached, monkeypatch, how):
    """`--cache-dir .` (or AUTOFIX_CACHE_DIR naming the project): the markers that hide a
    cache folder from git, backups and discovery never go into a folder holding code."""
    before = sorted(p.name for p in repo.iterdir())
    args = ("--cache-dir", ".") if how == "option" else ()
    if how == "environment":
        monkeypatch.setenv(cache.ENV_DIR, str(repo))
    cold, first = analysed_by(cached, "check", *args, ".")
    assert cold == run("check", "--no-cache", ".") and first == 7
    assert not (repo / ".gitignore").exists() and not (repo / "CACHEDIR.TAG").exists()
    assert sorted(p.name for p in repo.iterdir()) == sorted([*before, cache.DEFAULT_NAME])
    assert (repo / cache.DEFAULT_NAME / ".gitignore").exists()
    # Later runs find every file, and the cache answers them.
    warm, second = analysed_by(cached, "check", *args, ".")
    assert (warm, second) == (cold, 0)
    assert run("check", "--no-cache", ".") == cold
    if shutil.which("git"):
        assert {"train.py", "explore.ipynb", "clean.py"} <= _git_lists(repo)


def test_a_cache_folder_is_used_as_it_is(repo, cached, tmp_path_factory):
    """A new folder, an empty one, and one that already holds a cache (of this layout or an
    older autofix's) are the cache's own: markers and entries go straight into it."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "empty").mkdir()
    for name in ("new", "empty"):
        run("check", "--cache-dir", str(elsewhere / name), ".")
        assert sorted(p.name for p in (elsewhere / name).iterdir()) == [".gitignore", "0.1.0", "CACHEDIR.TAG"]
    old = elsewhere / "old"
    (old / "0.0.9" / "0123abcd").mkdir(parents=True)
    (old / "0.0.9" / "0123abcd" / "x.json").write_text("{}")
    (old / ".gitignore").write_text(cache.GITIGNORE)
    (old / "CACHEDIR.TAG").write_text(cache.CACHEDIR_TAG)
    run("check", "--cache-dir", str(old), ".")
    assert sorted(p.name for p in old.iterdir()) == [".gitignore", "0.0.9", "0.1.0", "CACHEDIR.TAG"]
    # A folder with a file of someone else's is not a cache, markers or not.
    (old / "notes.txt").write_text("mine\n")
    code, _, err = run("check", "--cache-dir", str(old), ".")
    assert (old / cache.DEFAULT_NAME / "CACHEDIR.TAG").exists()
    assert "delete them" in err  # the markers there hide notes.txt


def test_markers_an_earlier_autofix_left_in_a_project_are_named(repo, cached):
    """What the old mistake left behind (a project hidden by a `.gitignore` of `*`): never
    deleted by autofix, but named in a warning on every run until the user removes them."""
    (repo / ".gitignore").write_text(cache.GITIGNORE)
    (repo / "CACHEDIR.TAG").write_text(cache.CACHEDIR_TAG)
    code, out, err = run("check", ".")
    assert "warning: .gitignore and CACHEDIR.TAG were written by an earlier autofix" in err
    assert (repo / ".gitignore").read_text() == cache.GITIGNORE
    (repo / ".gitignore").unlink()
    (repo / "CACHEDIR.TAG").unlink()
    code, out, err = run("check", ".")
    assert "earlier autofix" not in err and "train.py:4:9: TFD001" in out


def test_a_cache_folder_that_is_a_file_or_read_only_is_a_warning(repo, cached, monkeypatch):
    (repo / "a-file").write_text("")
    expected = run("check", "--no-cache", ".")
    monkeypatch.setenv(cache.ENV_DIR, str(repo / "a-file"))
    code, out, err = run("check", ".")
    assert "warning: result cache not used: cannot use" in err and "it is a file, not a folder" in err
    assert (code, out) == expected[:2]
    monkeypatch.delenv(cache.ENV_DIR)
    if os.geteuid() == 0:
        return  # root writes into read-only folders
    (repo / "ro").mkdir()
    (repo / "ro" / "keep.txt").write_text("")
    (repo / "ro").chmod(0o555)
    try:
        code, out, err = run("check", "--cache-dir", "ro", ".")
    finally:
        (repo / "ro").chmod(0o755)
    assert "warning: result cache not used" in err and (code, out) == expected[:2]
    assert sorted(p.name for p in (repo / "ro").iterdir()) == ["keep.txt"]


def test_a_cache_that_cannot_be_made_is_a_warning_not_a_failure(repo, cached):
    (repo / "not-a-folder").write_text("")
    code, out, err = run("check", "--cache-dir", "not-a-folder/cache", ".")
    assert "warning: result cache not used" in err
    assert (code, out) == run("check", "--no-cache", ".")[:2]


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if p.name != "rules.json")


def test_torn_or_foreign_entries_are_misses(repo, cached):
    expected = run("check", ".")
    files = entries(repo / cache.DEFAULT_NAME)
    assert len(files) == 7  # every file, unrelated.py too
    # Half an entry, an empty one, another file's entry, an entry that is not JSON.
    files[0].write_bytes(files[0].read_bytes()[:40])
    files[1].write_bytes(b"")
    files[2].write_bytes(files[3].read_bytes())
    files[4].write_bytes(b"\x00\xff garbage")
    warm, count = analysed_by(cached, "check", ".")
    assert count == 4 and warm == expected
    # The misses were written again.
    assert analysed_by(cached, "check", ".") == (expected, 0)


def test_concurrent_runs_share_the_cache_safely(repo, monkeypatch):
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    for index in range(12):
        (repo / f"copy{index}.py").write_text(BROKEN + f"# copy {index}\n")
    command = [sys.executable, "-m", "autofix", "check", "-j", "2", "."]
    env = {k: v for k, v in os.environ.items() if k != cache.ENV_OFF}
    expected = subprocess.run([*command, "--no-cache"], cwd=repo, capture_output=True, text=True, env=env)
    runs = [subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    for process in runs:
        out, err = process.communicate(timeout=300)
        assert (process.returncode, out, err) == (expected.returncode, expected.stdout, expected.stderr)
    again = subprocess.run(command, cwd=repo, capture_output=True, text=True, env=env)
    assert (again.returncode, again.stdout, again.stderr) == (expected.returncode, expected.stdout, expected.stderr)
    assert not list((repo / cache.DEFAULT_NAME).rglob("*.tmp"))


def test_fix_writes_only_text_it_computed(repo, cached):
    run("diff", ".")
    for entry in entries(repo / cache.DEFAULT_NAME):
        data = json.loads(entry.read_text())
        if data["result"]["new_text"] is not None:
            data["result"]["new_text"] = "import os\nos.system('echo owned')\n"
            entry.write_text(json.dumps(data))
    run("fix", ".")
    fixed = (repo / "train.py").read_text()
    assert "owned" not in fixed and "with strategy.scope():" in fixed


def test_a_new_version_of_the_tool_does_not_read_the_old_ones_entries(repo, cached, monkeypatch):
    run("check", ".")
    monkeypatch.setattr(cache, "source_digest", lambda folders: "an edited checkout")
    cache.tool_fingerprint.cache_clear()
    try:
        warm, count = analysed_by(cached, "check", ".")
    finally:
        cache.tool_fingerprint.cache_clear()
    assert count == 7 and warm == run("check", "--no-cache", ".")


def test_the_fingerprint_covers_the_sources_of_the_package_and_its_rules(tmp_path, monkeypatch):
    digest = cache.source_digest
    seen = []
    monkeypatch.setattr(cache, "source_digest", lambda folders: seen.extend(folders) or "x")
    cache.tool_fingerprint.cache_clear()
    try:
        cache.tool_fingerprint()
    finally:
        cache.tool_fingerprint.cache_clear()
    assert any((Path(f) / "engine.py").exists() for f in seen)
    assert any((Path(f) / "__init__.py").exists() and "ORDER" in (Path(f) / "__init__.py").read_text() for f in seen)
    # And the digest follows any edit of any source file below those folders.
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    before = digest([str(package)])
    (package / "sub" / "b.py").write_text("y = 3\n")
    assert digest([str(package)]) != before


def test_internal_errors_are_not_cached(repo, cached, monkeypatch):
    rule = registry.rule_by_code("TFD002")
    real = rule.check

    def broken(self):
        raise RuntimeError("a bug")

    monkeypatch.setattr(rule, "check", broken)
    assert "internal error" in run("check", ".")[2]
    monkeypatch.setattr(rule, "check", real)
    assert run("check", ".") == run("check", "--no-cache", ".")


# --- cross-file facts -----------------------------------------------------------------------


def test_a_file_that_imports_a_helper_is_checked_again_when_the_helper_changes(tmp_path, monkeypatch, cached):
    """train.py's answer depends on helpers.py, whose build_model() makes the model it trains
    (see autofix.analysis.project): the cache keeps train.py's answer only while helpers.py
    has the bytes it had, and while a module it looked for and did not find is still absent."""
    (tmp_path / "train.py").write_text(HELPER_USER)
    (tmp_path / "helpers.py").write_text(HELPERS)
    monkeypatch.chdir(tmp_path)
    cold, count = analysed_by(cached, "check", "train.py")
    assert count == 1 and cold == run("check", "--no-cache", "train.py")
    warm, count = analysed_by(cached, "check", "train.py")
    assert count == 0 and warm == cold
    (tmp_path / "helpers.py").write_text(HELPERS.replace("BATCH = 64", "BATCH = 64 * 2").replace("Dense(1)", "Dense(2)"))
    again, count = analysed_by(cached, "check", "train.py")
    assert count == 1 and again == run("check", "--no-cache", "train.py")
    (tmp_path / "helpers.py").unlink()
    gone, count = analysed_by(cached, "check", "train.py")
    assert count == 1 and gone == run("check", "--no-cache", "train.py")
    (tmp_path / "helpers.py").write_text(HELPERS)
    # (One entry per file and question: the last answer replaced the first.)
    back, count = analysed_by(cached, "check", "train.py")
    assert count == 1 and back == cold
    assert "TFD001" in cold[1]


def test_the_same_bytes_in_another_folder_are_another_question(tmp_path, monkeypatch, cached):
    """A copy of train.py beside its helper, and one in a folder with no helper: the same
    bytes, two projects. Neither answer is the other's, whichever is checked first (the copy
    alone cannot know what build_model() makes: its finding names the helper's project)."""
    project, alone = tmp_path / "project", tmp_path / "alone"
    project.mkdir()
    alone.mkdir()
    for folder in (project, alone):
        (folder / "train.py").write_text(HELPER_USER)
    (project / "helpers.py").write_text(HELPERS)
    monkeypatch.chdir(tmp_path)
    expected = {folder: run("check", "--no-cache", str(folder / "train.py")) for folder in (project, alone)}
    assert expected[project][1].replace(str(project), "") != expected[alone][1].replace(str(alone), "")
    for first, second in ((project, alone), (alone, project)):
        shutil.rmtree(tmp_path / ".autofix_cache", ignore_errors=True)
        assert analysed_by(cached, "check", str(first / "train.py")) == (expected[first], 1)
        assert analysed_by(cached, "check", str(second / "train.py")) == (expected[second], 1)
        assert analysed_by(cached, "check", str(first / "train.py")) == (expected[first], 0)


def every_fixture() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.py") if "smoke" not in p.parts and "multiworker" not in p.parts)


def test_no_rule_opens_a_file(monkeypatch):
    """The rules' answers are functions of the file's own text: with every way of opening a
    file forbidden, every fixture gets the same answer. A rule that needs another file must
    set Rule.CROSS_FILE (and this test then names it)."""
    options = Options(select=("ALL", "TFD005"), unsafe_fixes=True)
    texts = {path: path.read_text(encoding="utf-8") for path in every_fixture()}
    expected = {path: process_text(text, str(path), options) for path, text in texts.items()}

    def forbidden(*args, **kwargs):
        raise AssertionError(f"a rule opened a file: {args[:1]}")

    for owner, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "listdir"), (os, "scandir")):
        monkeypatch.setattr(owner, name, forbidden)
    monkeypatch.setattr(pathlib.Path, "read_text", forbidden)
    monkeypatch.setattr(pathlib.Path, "read_bytes", forbidden)
    monkeypatch.setattr(pathlib.Path, "open", forbidden)
    try:
        for path, text in texts.items():
            assert process_text(text, str(path), options) == expected[path], path
    finally:
        monkeypatch.undo()
    assert not [rule.CODE for rule in registry.all_rules() if rule.CROSS_FILE]


class _ReadsItsImports(Rule):
    CODE = "TFD999"
    NAME = "reads-its-imports"
    DESCRIPTION = "a rule that would read the modules a file imports"
    CROSS_FILE = True

    def check(self) -> None:  # pragma: no cover - never run
        pass


def test_a_rule_that_reads_other_files_turns_the_cache_off_for_its_files(monkeypatch):
    real = registry.all_rules
    monkeypatch.setattr(registry, "all_rules", lambda: (*real(), _ReadsItsImports))
    engine._rules.cache_clear()
    try:
        assert not cache.ResultCache.usable(Options(select=("ALL",)))
        assert cache.ResultCache.usable(Options(select=("TFD001",)))
    finally:
        engine._rules.cache_clear()


def test_a_warm_run_does_not_load_the_engine(repo, monkeypatch):
    """What makes a warm run fast: no file is analysed, so neither the rules nor libcst are
    imported (the cache folder records what the rules are), no worker is started, and output
    that goes to a pipe needs no rich."""
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    env = {k: v for k, v in os.environ.items() if k != cache.ENV_OFF}
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('loaded:', sorted(m for m in ('libcst', 'autofix.engine', 'autofix.rule', 'rich', 'multiprocessing') if m in sys.modules), file=sys.stderr))\n"
        "from autofix.cli import main\n"
        "main(['check', '-j', '2', '.'])\n"
    )
    cold = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, env=env)
    # (The first run imports the rules to record them.)
    assert "'libcst'" in cold.stderr
    warm = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, env=env)
    assert "loaded: []" in warm.stderr
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
