"""``# autofix: ignore[...]`` and ``# autofix: ignore-file``."""

from __future__ import annotations

from autofix.engine import Options, analyse, process_path

HEAD = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"


def visible(analysis):
    return [(f.code, f.line) for f in analysis.findings if not f.suppressed]


def test_suppressed_finding_is_hidden_and_its_line_left_alone():
    source = HEAD + "model = tf.keras.Sequential()  # autofix: ignore[TFD001]\nmodel.fit(x, y)\n"
    analysis = analyse(source, Options(select=("TFD001",)))
    assert analysis.new_text is None
    assert visible(analysis) == []
    [finding] = analysis.findings
    assert finding.suppressed and not finding.fixable and finding.suppressed_by == 3


def test_other_codes_are_not_suppressed():
    source = HEAD + "model = tf.keras.Sequential()  # autofix: ignore[TFD002]\nmodel.fit(x, y)\n"
    analysis = analyse(source, Options(select=("TFD001",)))
    assert visible(analysis) == [("TFD001", 3)]
    assert "with strategy.scope():" in analysis.new_text


def test_bare_ignore_and_first_line_of_a_statement():
    source = (
        HEAD
        + "model = tf.keras.Sequential(  # autofix: ignore\n"
        + "    [tf.keras.layers.Dense(1)]\n"
        + ")\n"
        + "model.fit(x, y)\n"
    )
    analysis = analyse(source, Options(select=("TFD001",)))
    assert visible(analysis) == [] and analysis.new_text is None


def test_only_real_comments_count():
    source = HEAD + 'model = tf.keras.Sequential(name="# autofix: ignore")\nmodel.fit(x, y)\n'
    assert visible(analyse(source, Options(select=("TFD001",)))) == [("TFD001", 3)]


def test_ignore_file(tmp_path):
    path = tmp_path / "legacy.py"
    path.write_text("# autofix: ignore-file\n" + HEAD + "model = tf.keras.Sequential()\nmodel.fit(x, y)\n")
    result = process_path(str(path), Options(), write=True)
    assert result.skipped and not result.findings and not result.written


def test_unused_suppressions_are_reported_when_asked():
    source = (
        HEAD
        + "x = 1  # autofix: ignore[TFD001]\n"
        + "model = tf.keras.Sequential()  # autofix: ignore[TFD001, TFD003]\n"
        + "model.fit(x, y)\n"
    )
    quiet = analyse(source, Options(select=("TFD001", "TFD003")))
    assert [f.code for f in quiet.findings if f.code == "TFD100"] == []
    loud = analyse(source, Options(select=("TFD001", "TFD003"), unused_suppressions=True))
    assert [(f.code, f.line, f.message) for f in loud.findings if f.code == "TFD100"] == [
        ("TFD100", 3, "autofix: ignore comment suppresses nothing (TFD001)"),
        ("TFD100", 4, "autofix: ignore comment suppresses nothing (TFD003)"),
    ]
    # A comment for a rule that did not run is not called unused.
    only_one = analyse(source, Options(select=("TFD001",), unused_suppressions=True))
    assert [f.line for f in only_one.findings if f.code == "TFD100"] == [3]
