"""Which files a run picks up."""

from __future__ import annotations

import os

from autofix.discovery import Discovery


def tree(root, files):
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(root, **kw):
    d = Discovery(**kw)
    return sorted(os.path.relpath(p, root) for p in d.files([str(root)]))


def test_recurses_and_picks_python_files(tmp_path):
    tree(tmp_path, ["a.py", "pkg/b.py", "pkg/deep/c.py", "notes.txt", "pkg/data.json"])
    assert found(tmp_path) == ["a.py", "pkg/b.py", "pkg/deep/c.py"]


def test_skips_virtualenvs_site_packages_and_build_dirs(tmp_path):
    tree(
        tmp_path,
        [
            "train.py",
            ".venv/lib/x.py",
            "env/lib/python3.11/site-packages/keras/y.py",
            "myenv/bin/z.py",
            "build/lib/w.py",
            "dist/v.py",
            "__pycache__/u.py",
            ".git/hooks/t.py",
        ],
    )
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert found(tmp_path) == ["train.py"]


def test_honours_gitignore_including_nested_and_negation(tmp_path):
    tree(tmp_path, ["keep.py", "generated/a.py", "sub/skip_me.py", "sub/keep_me.py", "sub/x_special.py"])
    (tmp_path / ".gitignore").write_text("generated/\nskip_*.py\nx_*.py\n")
    (tmp_path / "sub" / ".gitignore").write_text("!x_special.py\n")
    assert found(tmp_path) == ["keep.py", "sub/keep_me.py", "sub/x_special.py"]
    assert found(tmp_path, respect_gitignore=False) == [
        "generated/a.py",
        "keep.py",
        "sub/keep_me.py",
        "sub/skip_me.py",
        "sub/x_special.py",
    ]


def test_exclude_and_include_globs(tmp_path):
    tree(tmp_path, ["a.py", "legacy/b.py", "tests/test_c.py", "scripts/run.pyw"])
    assert found(tmp_path, exclude=["legacy/", "test_*.py"]) == ["a.py"]
    assert found(tmp_path, include=["*.py", "*.pyw"]) == ["a.py", "legacy/b.py", "scripts/run.pyw", "tests/test_c.py"]


def test_explicit_files_are_taken_unless_force_excluded(tmp_path):
    tree(tmp_path, ["ignored.py", "other.txt"])
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    d = Discovery()
    files = list(d.files([str(tmp_path / "ignored.py"), str(tmp_path / "other.txt")]))
    assert files == [str(tmp_path / "ignored.py"), str(tmp_path / "other.txt")]
    named = str(tmp_path / "ignored.py")
    assert list(Discovery(exclude=["ignored.py"]).files([named])) == [named]
    assert list(Discovery(exclude=["ignored.py"], force_exclude=True).files([named])) == []


def test_excludes_are_relative_to_their_root_and_a_named_folder_overrides_them(tmp_path):
    tree(tmp_path, ["src/app.py", "src/legacy/old.py", "examples/demo/train.py", "examples/demo/gen/x.py"])
    d = Discovery(exclude=["/src/legacy/", "/examples/", "gen/"], root=str(tmp_path))
    only_src = Discovery(exclude=["/src/legacy/"], root=str(tmp_path)).files([str(tmp_path / "src")])
    assert [os.path.relpath(p, tmp_path) for p in only_src] == ["src/app.py"]
    assert sorted(os.path.relpath(p, tmp_path) for p in d.files([str(tmp_path)])) == ["src/app.py"]
    # Naming an excluded folder overrides the globs that exclude it, not the others.
    assert [os.path.relpath(p, tmp_path) for p in d.files([str(tmp_path / "examples" / "demo")])] == ["examples/demo/train.py"]


def test_symlinks_never_leave_the_tree_and_loops_end(tmp_path):
    outside = tmp_path / "outside"
    tree(outside, ["secret.py"])
    root = tmp_path / "repo"
    tree(root, ["a.py", "pkg/b.py"])
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape_file.py").symlink_to(outside / "secret.py")
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    (root / "alias.py").symlink_to(root / "a.py")
    files = found(root)
    # Each real file once, nothing from outside, and the loop does not recurse forever.
    assert files == ["a.py", "pkg/b.py"]


def _linked_tree(root):
    """legacy/ and generated/ hold files the configuration keeps autofix away from; links to
    them, directly, through a chain, and through a linked folder, sit at the top."""
    tree(root, ["app.py", "legacy/old.py", "generated/gen.py", "build/made.py", "ok/kept.py"])
    (root / "link_to_old.py").symlink_to("legacy/old.py")
    (root / "link_to_gen.py").symlink_to(root / "generated" / "gen.py")
    (root / "link_to_made.py").symlink_to("build/made.py")
    (root / "ok" / "hop.py").symlink_to("../legacy/old.py")
    (root / "chain.py").symlink_to("ok/hop.py")
    (root / "legacy_dir").symlink_to("legacy", target_is_directory=True)
    (root / "link_to_kept.py").symlink_to("ok/kept.py")
    (root / ".gitignore").write_text("generated/\n")


def found_in(top, **kw):
    return sorted(os.path.relpath(p, top) for p in Discovery(root=str(top), **kw).files([str(top)]))


def test_a_link_is_judged_by_the_file_it_leads_to(tmp_path):
    """Excludes, .gitignore and skipped folders apply to what a link leads to, and to every
    link on the way: none of the links into legacy/, generated/ or build/ is picked up."""
    _linked_tree(tmp_path)
    # (ok/kept.py is found once, as link_to_kept.py, the first of its names.)
    assert found_in(tmp_path, exclude=["legacy/"]) == ["app.py", "link_to_kept.py"]
    # Without the exclude, legacy/old.py is found once, under one of its names.
    names = found_in(tmp_path)
    assert "link_to_kept.py" in names and sum(n in names for n in ("legacy/old.py", "link_to_old.py", "chain.py", "ok/hop.py")) == 1
    assert not {"link_to_gen.py", "link_to_made.py", "generated/gen.py"} & set(names)


def test_a_link_through_an_excluded_link_is_excluded(tmp_path):
    tree(tmp_path, ["real/x.py"])
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "hop.py").symlink_to("../real/x.py")
    (tmp_path / "top.py").symlink_to("legacy/hop.py")
    assert found_in(tmp_path, exclude=["legacy/"]) == ["real/x.py"]
    assert found_in(tmp_path, exclude=["legacy/", "real/"]) == []


def test_a_named_link_with_force_exclude_is_judged_by_its_file(tmp_path):
    _linked_tree(tmp_path)
    outside = tmp_path.parent / (tmp_path.name + "_outside")
    tree(outside, ["legacy_copy.py"])
    (tmp_path / "out.py").symlink_to(outside / "legacy_copy.py")
    d = Discovery(exclude=["legacy/", "legacy_copy.py"], root=str(tmp_path), force_exclude=True)
    for name in ("link_to_old.py", "chain.py", "legacy_dir/old.py", "out.py"):
        assert list(d.files([str(tmp_path / name)])) == [], name
    assert list(d.files([str(tmp_path / "link_to_kept.py")])) == [str(tmp_path / "link_to_kept.py")]
    # Without --force-exclude a named file is analysed, as the file itself would be.
    named = Discovery(exclude=["legacy/"], root=str(tmp_path))
    assert list(named.files([str(tmp_path / "link_to_old.py")])) == [str(tmp_path / "link_to_old.py")]


def test_missing_paths_are_recorded(tmp_path):
    d = Discovery()
    assert list(d.files([str(tmp_path / "nope")])) == []
    assert d.missing == [str(tmp_path / "nope")]


def test_fix_never_writes_an_excluded_file_through_a_link(tmp_path, monkeypatch):
    """The reproducer: legacy/ is excluded, train.py at the top is a link to legacy/train.py."""
    from click.testing import CliRunner

    from autofix.cli import main
    from conftest import BROKEN

    (tmp_path / "pyproject.toml").write_text('[tool.autofix]\nexclude = ["legacy/"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "train.py").write_text(BROKEN)
    (tmp_path / "train.py").symlink_to("legacy/train.py")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["fix", "--no-cache", "."])
    assert done.exit_code == 0 and "Checked 0 files" in done.stderr
    assert (tmp_path / "legacy" / "train.py").read_text() == BROKEN
    done = CliRunner().invoke(main, ["fix", "--no-cache", "--force-exclude", "train.py"])
    assert "Checked 0 files" in done.stderr and (tmp_path / "legacy" / "train.py").read_text() == BROKEN
    # Per-file ignores follow the link too.
    (tmp_path / "pyproject.toml").write_text('[tool.autofix]\nper-file-ignores = {"legacy/*" = ["TFD001"]}\n')
    (tmp_path / "legacy" / "train.py").unlink()
    (tmp_path / "legacy" / "train.py").write_text(BROKEN)
    done = CliRunner().invoke(main, ["check", "--no-cache", "train.py"])
    assert done.exit_code == 0 and "Checked 1 file, no findings" in done.stderr
    assert "train.py:4:9: TFD001" in CliRunner().invoke(main, ["check", "--no-cache", "--isolated", "train.py"]).stdout
