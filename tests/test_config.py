"""`[tool.autofix]` in pyproject.toml: where it is found, what each key does, how command-line
options override it, and how a bad table is reported (exit 2, naming the key)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix import config
from autofix.cli import main
from conftest import BROKEN, FIXED

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# TFD001 (model and compile outside the scope) and TFD002 (an unscaled batch size) and a
# constant learning rate (TFD005, a suggestion unless unsafe fixes are on).
TWO_RULES = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss='mse')\n"
    "model.fit(x, y, batch_size=64)\n"
)


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def codes(result) -> list[tuple[str, str]]:
    assert result.exit_code in (0, 1), result.output
    return [(item["path"], item["code"]) for item in json.loads(result.stdout)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A git work tree with a pyproject.toml; ``write(table)`` sets its [tool.autofix]."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(TWO_RULES)
    monkeypatch.chdir(tmp_path)

    def write(table: str) -> Path:
        path = tmp_path / "pyproject.toml"
        path.write_text(f"[project]\nname = 'p'\n\n[tool.autofix]\n{table}\n")
        return path

    write.root = tmp_path
    return write


def check(*args):
    return run("check", "--format", "json", *args)


# --- finding the table -------------------------------------------------------------------


def test_found_by_walking_up_from_the_paths(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.autofix]\nselect = ['TFD001']\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    # A pyproject.toml without the table (a sub-package's) is passed over.
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'a'\n")
    (deep / "train.py").write_text(TWO_RULES)
    assert config.find([str(deep / "train.py")]) == str(tmp_path / "pyproject.toml")
    assert config.find([str(deep), str(tmp_path / "a")]) == str(tmp_path / "pyproject.toml")
    assert config.load([str(deep)]).select == ("TFD001",)


def test_the_search_stops_at_the_git_root(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.autofix]\nselect = ['TFD001']\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "train.py").write_text(TWO_RULES)
    assert config.find([str(repo / "train.py")]) is None
    assert config.load([str(repo)]) == config.Settings()


def test_the_nearest_table_wins(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.autofix]\nselect = ['TFD001']\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[tool.autofix]\nselect = ['TFD002']\n")
    assert config.load([str(tmp_path / "sub")]).select == ("TFD002",)
    assert config.load([str(tmp_path)]).select == ("TFD001",)


def test_standard_input_uses_the_stdin_filename_or_the_working_directory(project):
    project("select = ['TFD002']")
    sub = project.root / "pkg"
    sub.mkdir()
    assert config.find(["-"]) == str(project.root / "pyproject.toml")
    assert config.find(["-"], str(sub / "x.py")) == str(project.root / "pyproject.toml")
    assert codes(run("check", "--format", "json", "-", input=TWO_RULES)) == [("-", "TFD002")]


# --- keys and precedence -----------------------------------------------------------------


def test_select_and_the_command_line_override(project):
    project("select = ['TFD002']")
    assert codes(check(".")) == [("train.py", "TFD002")]
    assert {c for _, c in codes(check("--select", "TFD001", "."))} == {"TFD001"}


def test_ignore_and_the_command_line_override(project):
    project("select = ['TFD', 'TFD005']\nignore = ['TFD001', 'TFD005']")
    assert codes(check(".")) == [("train.py", "TFD002")]
    # --ignore replaces the table's list; an empty one clears it.
    assert {c for _, c in codes(check("--ignore", "TFD002", "."))} == {"TFD001", "TFD005"}
    assert {c for _, c in codes(check("--ignore", "", "."))} == {"TFD001", "TFD002", "TFD005"}


def test_unsafe_fixes_and_the_command_line_override(project):
    project("select = ['TFD005']\nunsafe-fixes = true")
    items = json.loads(check(".").stdout)
    assert [i["fixable"] for i in items if i["code"] == "TFD005"] == [True]
    items = json.loads(check("--no-unsafe-fixes", ".").stdout)
    assert [i["fixable"] for i in items if i["code"] == "TFD005"] == [False]
    project("select = ['TFD005']\nunsafe-fixes = false")
    items = json.loads(check("--unsafe-fixes", ".").stdout)
    assert [i["fixable"] for i in items if i["code"] == "TFD005"] == [True]


def test_exclude_extend_exclude_and_the_command_line_override(project):
    for name in ("legacy", "scratch", "other"):
        (project.root / name).mkdir()
        (project.root / name / "t.py").write_text(TWO_RULES)
    project("exclude = ['legacy/']\nextend-exclude = ['scratch/']\nselect = ['TFD001']")
    paths = {p for p, _ in codes(check("."))}
    assert paths == {"train.py", "other/t.py"}
    # --exclude replaces `exclude`; `extend-exclude` still applies.
    paths = {p for p, _ in codes(check("--exclude", "other/", "."))}
    assert paths == {"train.py", "legacy/t.py"}
    # A file named on the command line is taken, as with Ruff, unless --force-exclude (which
    # the pre-commit hooks pass, since pre-commit names every staged file).
    assert {p for p, _ in codes(check("scratch/t.py"))} == {"scratch/t.py"}
    assert codes(check("--force-exclude", "scratch/t.py")) == []
    project("extend-exclude = ['scratch/']\nforce-exclude = true\nselect = ['TFD001']")
    assert codes(check("scratch/t.py")) == []


def test_include_and_the_command_line_override(project):
    (project.root / "job.pyw").write_text(BROKEN)
    project("include = ['*.pyw']\nselect = ['TFD001']")
    assert {p for p, _ in codes(check("."))} == {"job.pyw"}
    assert {p for p, _ in codes(check("--include", "*.py", "."))} == {"train.py"}


def test_respect_gitignore_and_the_command_line_override(project):
    (project.root / ".gitignore").write_text("ignored/\n")
    (project.root / "ignored").mkdir()
    (project.root / "ignored" / "t.py").write_text(BROKEN)
    project("select = ['TFD001']")
    assert {p for p, _ in codes(check("."))} == {"train.py"}
    assert {p for p, _ in codes(check("--no-gitignore", "."))} == {"train.py", "ignored/t.py"}
    project("select = ['TFD001']\nrespect-gitignore = false")
    assert {p for p, _ in codes(check("."))} == {"train.py", "ignored/t.py"}


def test_per_file_ignores_are_relative_to_the_pyproject(project, monkeypatch):
    (project.root / "legacy").mkdir()
    (project.root / "legacy" / "t.py").write_text(TWO_RULES)
    project("select = ['TFD001', 'TFD002']\n[tool.autofix.per-file-ignores]\n'legacy/*' = ['TFD001']")
    assert sorted(codes(check("."))) == [
        ("legacy/t.py", "TFD002"),
        ("train.py", "TFD001"),
        ("train.py", "TFD001"),
        ("train.py", "TFD002"),
    ]
    # From inside the folder the pattern still means <pyproject dir>/legacy/*.
    monkeypatch.chdir(project.root / "legacy")
    assert codes(check(".")) == [("t.py", "TFD002")]
    # ... and for code read from standard input under that name.
    assert codes(run("check", "--format", "json", "--stdin-filename", "t.py", "-", input=TWO_RULES)) == [("t.py", "TFD002")]


def test_fix_uses_the_table(project):
    project("select = ['TFD001']")
    (project.root / "train.py").write_text(BROKEN)
    assert run("fix", ".").exit_code == 0
    assert (project.root / "train.py").read_text() == FIXED


def test_isolated_and_config_file(project, tmp_path_factory):
    project("select = ['TFD002']")
    # Without the table, the default rules run (TFD005 is opt-in).
    assert {c for _, c in codes(check("--isolated", "."))} == {"TFD001", "TFD002"}
    elsewhere = tmp_path_factory.mktemp("cfg") / "pyproject.toml"
    elsewhere.write_text("[tool.autofix]\nselect = ['TFD001']\n")
    assert {c for _, c in codes(check("--config", str(elsewhere), "."))} == {"TFD001"}


def test_every_key_is_a_setting():
    fields = {f for f in config.Settings.__dataclass_fields__} - {"path"}
    assert {name for name, _ in config.KEYS.values()} == fields


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, message",
    [
        ("selct = ['TFD001']", "unknown key 'selct'"),
        ("select = 'TFD001'", "select: expected a list of strings, got 'TFD001'"),
        ("select = ['TFD999']", "select: unknown rule code 'TFD999'"),
        ("ignore = [1]", "ignore: expected a list of strings"),
        ("unsafe-fixes = 'yes'", "unsafe-fixes: expected true or false, got 'yes'"),
        ("respect-gitignore = 1", "respect-gitignore: expected true or false, got 1"),
        ("exclude = 'build'", "exclude: expected a list of strings"),
        ("extend-exclude = [true]", "extend-exclude: expected a list of strings"),
        ("include = {}", "include: expected a list of strings"),
        ("per-file-ignores = ['x']", "per-file-ignores: expected a table"),
        ("per-file-ignores = {'a/*' = 'TFD001'}", "per-file-ignores.'a/*': expected a list of strings"),
        ("per-file-ignores = {'a/*' = ['NOPE']}", "per-file-ignores.'a/*': unknown rule code 'NOPE'"),
    ],
)
def test_a_bad_table_exits_2_naming_the_key(project, table, message):
    project(table)
    for command in ("check", "diff", "fix"):
        result = run(command, ".")
        assert result.exit_code == 2, result.output
        assert "pyproject.toml: [tool.autofix]" in result.stderr
        assert message in result.stderr
        assert "Usage:" not in result.stderr
    assert (project.root / "train.py").read_text() == TWO_RULES


def test_invalid_toml_exits_2_naming_the_file(project):
    (project.root / "pyproject.toml").write_text("[tool.autofix\nselect = [\n")
    result = run("check", ".")
    assert result.exit_code == 2
    assert "pyproject.toml: not valid TOML" in result.stderr


def test_a_table_that_is_not_a_table(project):
    (project.root / "pyproject.toml").write_text("[tool]\nautofix = 1\n")
    result = run("check", ".")
    assert result.exit_code == 2 and "[tool.autofix] must be a table" in result.stderr


def test_a_config_file_without_the_table(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "pyproject.toml"
    other.write_text("[project]\nname = 'x'\n")
    result = run("check", "--config", str(other), ".")
    assert result.exit_code == 2 and "no [tool.autofix] table" in result.stderr


def test_a_bad_option_value_on_the_command_line_still_exits_2(project):
    project("select = ['TFD001']")
    result = run("check", "--select", "XYZ", ".")
    assert result.exit_code == 2 and "unknown rule code 'XYZ'" in result.stderr


# --- this repository's own table ---------------------------------------------------------


def test_this_repository_does_not_rewrite_its_own_fixtures(monkeypatch):
    monkeypatch.chdir(ROOT)
    settings = config.load(["."])
    assert settings.path == str(ROOT / "pyproject.toml")
    found = list(settings.discovery().files(["."]))
    assert found and not any(Path(p).parts[0] in ("fixtures", "tests", "examples") for p in found)
    # Files under them are excluded when named with --force-exclude, as the pre-commit hooks do.
    assert list(settings.discovery(force_exclude=True).files(["fixtures/tfd001/load_model.py"])) == []
    # Walking a folder below them by its own name still works: README's main job.
    assert list(settings.discovery().files([os.path.join("examples", "legacy-repo")]))


def test_the_documented_example_is_a_valid_table():
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    settings = config.parse(tomllib.loads(block)["tool"]["autofix"], "docs/ci.md")
    assert settings.select == ("TFD001", "TFD002") and settings.extend_exclude == ("scratch/",)
    assert settings.per_file_ignores == (("experiments/*", ("TFD002",)),)
