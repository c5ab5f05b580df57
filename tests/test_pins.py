"""Which Keras a file runs as its repository runs it (autofix.analysis.project.pins): a Keras 2
pin the repository makes outside the file (requirements, setup files, a conda environment, a
Dockerfile, a shell script or Makefile) silences what fails only on Keras 3 (TFD006, TFD001's
optimizer made outside the scope); a Keras 3 pin, or none, changes nothing, and TFD006 then names
the pin. The projects are fixtures/pins/<name>/, copied into a temporary folder; `autofix check`
runs on the folder, as a user would. No TensorFlow runs here.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix.analysis.project import pins
from autofix.cli import main
from fixturecases import FIXTURES

PINS = FIXTURES / "pins"


def project(tmp_path: Path, name: str, monkeypatch) -> Path:
    target = tmp_path / name
    shutil.copytree(PINS / name, target)
    monkeypatch.chdir(target)
    return target


def run(*args: str, stdin: str | None = None):
    result = CliRunner().invoke(main, [*args, "-j", "1"], input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def codes(output: str) -> list[str]:
    return [word for line in output.splitlines() for word in line.split() if word.startswith("TFD") and word[3:].isdigit()]


# --- what one pin means -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written, meaning",
    [
        ("tensorflow==2.12.0", (2, "tensorflow")),
        ("tensorflow<2.16", (2, "tensorflow")),
        ("tensorflow-gpu~=2.4.1", (2, "tensorflow")),
        ("tensorflow>=2.10,<2.16", (2, "tensorflow")),
        ("tensorflow[and-cuda]==2.15.1; python_version >= '3.9'", (2, "tensorflow")),
        ("keras<3", (2, "keras")),
        ("keras==2.15.0", (2, "keras")),
        ("python==3.7.*", (2, "python")),
        ("tensorflow==2.17.0", (3, "tensorflow")),
        ("tensorflow>=2.16", (3, "tensorflow")),
        ("keras>=3", (3, "keras")),
        # Pre-releases and the nightlies named for a release.
        ("tensorflow==2.0.0-alpha0", (2, "tensorflow")),
        ("tensorflow-gpu==2.0.0rc1", (2, "tensorflow")),
        ("tensorflow==2.17.0rc1", (3, "tensorflow")),
        ("tf-nightly-2.0-preview", (2, "tensorflow")),
        ("tf-nightly-gpu-2.0-preview", (2, "tensorflow")),
        ("tf-nightly-gpu-2.0-preview==2.0.0.dev20190526", (2, "tensorflow")),
        ("tf-nightly", None),
        # Not pins: no version, versions on both sides, a Python on which TF 2.15 runs too.
        ("tensorflow", None),
        ("tensorflow>=2.10", None),
        ("tensorflow~=2.12", None),
        ("tensorflow!=2.16.0", None),
        ("python==3.10.*", None),
        ("tensorflow-datasets==4.8.0", None),
        ("tf-keras", None),
        ("not a requirement", None),
    ],
)
def test_what_a_requirement_says_of_keras(written, meaning):
    assert pins._meaning(written) == meaning


def read_pins(tmp_path: Path, name: str, text: str) -> list[tuple[int, str, int]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return [(line, written, keras) for line, written, keras, _ in pins._pins_of(name, "", path.read_bytes())]


def test_the_formats(tmp_path):
    assert read_pins(tmp_path, "requirements-gpu.txt", """\
        # training
        -r base.txt
        numpy>=1.22
        tensorflow-gpu==2.11.0  # the cluster's
        """) == [(4, "tensorflow-gpu==2.11.0", 2)]
    assert read_pins(tmp_path, "setup.cfg", """\
        [options]
        install_requires =
            numpy
            tensorflow>=2.10,<2.16
        """) == [(4, "tensorflow>=2.10,<2.16", 2)]
    assert read_pins(tmp_path, "setup.py", """\
        from setuptools import setup
        setup(name="x", install_requires=["numpy", 'keras<3'])
        """) == [(2, "keras<3", 2)]
    assert read_pins(tmp_path, "pyproject.toml", """\
        [project]
        name = "x"
        dependencies = ["numpy", "tensorflow>=2.16"]
        """) == [(3, "tensorflow>=2.16", 3)]
    assert read_pins(tmp_path, "pyproject.toml", """\
        [tool.poetry.dependencies]
        python = "^3.8"
        tensorflow = "~2.11"
        """) == [(3, "tensorflow>=2.11,<2.12", 2)]
    assert read_pins(tmp_path, "environment.yml", """\
        dependencies:
          - python=3.10
          - tensorflow-gpu=2.4.1=cuda_build
          - pip:
            - keras==2.4.3
        """) == [(3, "tensorflow-gpu=2.4.1=cuda_build", 2), (5, "keras==2.4.3", 2)]
    assert read_pins(tmp_path, "Dockerfile", """\
        FROM tensorflow/tensorflow:2.11.0-gpu
        RUN apt-get update && \\
            pip install --no-cache-dir "tensorflow==2.12.0" pandas
        """) == [(1, "FROM tensorflow/tensorflow:2.11.0-gpu", 2), (2, "tensorflow==2.12.0", 2)]
    assert read_pins(tmp_path, "Dockerfile", "FROM tensorflow/tensorflow:latest-gpu\n") == []
    assert read_pins(tmp_path, "Dockerfile", "FROM python:3.8-slim\n") == [(1, "FROM python:3.8-slim", 2)]
    assert read_pins(tmp_path, "run.sh", "#!/bin/sh\n# pip install tensorflow==2.4\npip3 install tensorflow==2.9.1 && python train.py\n") == [
        (3, "tensorflow==2.9.1", 2)
    ]
    assert read_pins(tmp_path, "Makefile", "run:\n\tTF_CONFIG='{}' python3.7 main.py\n") == [(2, "python3.7", 2)]
    # A README: its install commands (in a code block, indented, or inline code) and the
    # requirement lines of its code blocks; never its prose.
    assert read_pins(tmp_path, "README.md", """\
        Tested with TensorFlow 2.1; tensorflow==2.3 was never tried.

        ```bash
        pip install tf-nightly-gpu-2.0-preview && python train.py
        ```
        Or run `pip3 install tensorflow==2.1.0` first, or

            $ conda install tensorflow-gpu=2.1 numpy

        ```
        - keras==2.3.1
        numpy>=1.16
        ```
        """) == [(4, "tf-nightly-gpu-2.0-preview", 2), (6, "tensorflow==2.1.0", 2), (8, "tensorflow-gpu=2.1", 2), (11, "keras==2.3.1", 2)]
    assert read_pins(tmp_path, "README.rst", "Needs TensorFlow >= 2.16 (pip install tensorflow==2.17).\n") == []
    # Inline code that opens a line is not a fence: the prose after it stays prose.
    assert read_pins(tmp_path, "README.md", """\
        ```MirroredStrategy``` trains on one machine;
        tensorflow==2.3
        ```
        pip install tensorflow==2.2.0
        ```
        """) == [(4, "tensorflow==2.2.0", 2)]


# --- the CLI on a folder ------------------------------------------------------------------------


def test_a_requirements_pin_of_tensorflow_2_12_silences_tfd006(tmp_path, monkeypatch):
    project(tmp_path, "tf212", monkeypatch)
    code, out, _ = run("check", "--no-cache", ".")
    assert "TFD006" not in codes(out)
    # The same file given alone (standard input: no project) is reported as today.
    code, out, _ = run("check", "--no-cache", "-", stdin=Path("train.py").read_text())
    assert "TFD006" in codes(out)
    # And no fix is made for Keras 3 where the repository runs Keras 2.
    before = Path("train.py").read_bytes()
    run("fix", "--no-cache", "--unsafe-fixes", ".")
    assert Path("train.py").read_bytes() == before


def test_a_requirements_pin_of_tensorflow_2_17_keeps_tfd006_and_names_the_pin(tmp_path, monkeypatch):
    project(tmp_path, "tf217", monkeypatch)
    code, out, _ = run("check", "--no-cache", ".")
    assert codes(out) == ["TFD006"] and code == 1
    assert "requirements.txt:2 pins tensorflow==2.17.0: Keras 3" in out
    code, out, _ = run("check", "--no-cache", "--format", "json", ".")
    [finding] = json.loads(out)
    assert finding["related"] == [{"path": "requirements.txt", "line": 2, "message": "requirements.txt:2 pins tensorflow==2.17.0: Keras 3"}]


def test_a_dockerfile_on_tensorflow_2_11_silences_tfd006(tmp_path, monkeypatch):
    root = project(tmp_path, "docker211", monkeypatch)
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])
    (root / "Dockerfile").write_text("FROM tensorflow/tensorflow:latest-gpu\n")
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])


def test_setup_py_install_requires_silences_tfd006(tmp_path, monkeypatch):
    project(tmp_path, "setup_py", monkeypatch)
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])


def test_the_requirements_file_nearest_the_script_decides(tmp_path, monkeypatch):
    root = project(tmp_path, "nested", monkeypatch)
    # scripts/requirements-worker.txt pins 2.15 (Keras 2), the root's 2.17 (Keras 3).
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])
    (root / "scripts" / "requirements-worker.txt").unlink()
    out = run("check", "--no-cache", ".")[1]
    assert "TFD006" in codes(out) and "requirements.txt:1 pins tensorflow==2.17.0: Keras 3" in out
    # Files of one folder that disagree decide nothing.
    (root / "scripts" / "requirements-worker.txt").write_text("tensorflow==2.15.1\n")
    (root / "scripts" / "Dockerfile").write_text("FROM tensorflow/tensorflow:2.17.0\n")
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])


def test_a_keras_3_only_tfd001_finding_is_not_reported_under_a_keras_2_pin(tmp_path, monkeypatch):
    root = project(tmp_path, "optimizer_outside", monkeypatch)
    assert "TFD001" not in codes(run("check", "--no-cache", ".")[1])
    (root / "environment.yml").unlink()
    assert "TFD001" in codes(run("check", "--no-cache", ".")[1])


def test_a_makefile_running_python_3_7_silences_tfd006(tmp_path, monkeypatch):
    """mory91/tf-dist: its Makefile runs main.py with python3.7, on which TensorFlow stops at
    2.11 (Keras 2)."""
    root = project(tmp_path, "tf217", monkeypatch)
    (root / "requirements.txt").unlink()
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])
    (root / "Makefile").write_text("run:\n\tTF_CONFIG='{}' python3.7 train.py\n")
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])


@pytest.mark.parametrize(
    "module, reported",
    [
        ("module load TensorFlow/2.11.0-foss-2022a-CUDA-11.7.0", False),
        ("ml Horovod/0.28.1-foss-2022a-CUDA-11.7.0-TensorFlow-2.11.0", False),
        ("module purge && module load tensorflow-gpu/2.4.1 cuda/11.0", False),
        ("module load TensorFlow/2.17.0-foss-2023a", True),
        ("# module load TensorFlow/2.11.0-foss-2022a", True),
        ("module load GCC/12.3.0 CUDA/12.1", True),
    ],
)
def test_an_hpc_job_script_loading_a_tensorflow_module_decides_tfd006(tmp_path, monkeypatch, module, reported):
    """A SLURM job script selects TensorFlow with the cluster's environment modules (Lmod,
    EasyBuild's names): TensorFlow 2.11 is Keras 2, 2.17 Keras 3; a commented line or other
    modules say nothing."""
    root = project(tmp_path, "tf217", monkeypatch)
    (root / "requirements.txt").unlink()
    (root / "jobscript.sh").write_text(f"#!/bin/bash\n#SBATCH -N 2\n{module}\nsrun python train.py\n")
    assert ("TFD006" in codes(run("check", "--no-cache", ".")[1])) is reported


def test_a_readme_that_installs_the_tensorflow_2_0_nightly_silences_tfd001_and_tfd006(tmp_path, monkeypatch):
    """lambdal's TensorFlow 2 tutorial: no pin file, a README that installs
    tf-nightly-gpu-2.0-preview (Keras 2), an optimizer made before the scope, a multi-worker fit."""
    root = project(tmp_path, "readme_nightly", monkeypatch)
    code, out, _ = run("check", "--no-cache", "--select", "TFD001,TFD006", ".")
    assert codes(out) == [] and code == 0
    readme = (root / "README.md").read_text()
    # Prose alone names no TensorFlow to install.
    (root / "README.md").write_text(readme.replace("pip install tf-nightly-gpu-2.0-preview matplotlib", "pip install matplotlib"))
    assert sorted(codes(run("check", "--no-cache", ".")[1])) == ["TFD001", "TFD006"]
    # A pin file says otherwise: it decides, whatever the README installs.
    (root / "README.md").write_text(readme)
    (root / "requirements.txt").write_text("tensorflow==2.17.0\n")
    assert sorted(codes(run("check", "--no-cache", ".")[1])) == ["TFD001", "TFD006"]
    # A requirements file that pins nothing says nothing: the README decides again.
    (root / "requirements.txt").write_text("tensorflow\nmatplotlib\n")
    assert codes(run("check", "--no-cache", "--select", "TFD001,TFD006", ".")[1]) == []


def test_a_readme_pin_is_named_with_its_place(tmp_path, monkeypatch):
    from autofix.analysis.project.pins import keras_pin

    root = project(tmp_path, "readme_nightly", monkeypatch)
    pin = keras_pin(str(root / "worker.py"))
    assert pin is not None and pin.reason(str(root / "worker.py")) == (
        "its repository's README installs tf-nightly-gpu-2.0-preview (README.md:10), whose Keras is Keras 2"
    )


# --- the cache ----------------------------------------------------------------------------------


def counting_check(cached):
    """``autofix check .`` run in-process: its outcome, and how many files it analysed again
    (the results the cache stored meanwhile)."""

    def check():
        before = len(cached)
        outcome = run("check", ".")
        return outcome, len(cached) - before

    return check


def test_editing_adding_or_removing_a_pin_file_checks_the_file_again(tmp_path, monkeypatch, cached):
    root = project(tmp_path, "tf212", monkeypatch)

    check = counting_check(cached)

    cold, count = check()
    assert count == 1 and "TFD006" not in codes(cold[1])
    warm, count = check()
    assert count == 0 and warm == cold
    requirements = root / "requirements.txt"
    requirements.write_text(requirements.read_text().replace("2.12.0", "2.17.0"))
    edited, count = check()
    assert count == 1 and "TFD006" in codes(edited[1]) and edited == run("check", "--no-cache", ".")
    # A requirements file added beside it, of another name, is read too.
    (root / "requirements-cluster.txt").write_text("tensorflow==2.17.0\nkeras==3.5.0\n")
    _, count = check()
    assert count == 1
    requirements.unlink()
    (root / "requirements-cluster.txt").write_text("tensorflow<2.16\n")
    added, count = check()
    assert count == 1 and "TFD006" not in codes(added[1]) and added == run("check", "--no-cache", ".")
    (root / "requirements-cluster.txt").unlink()
    gone, count = check()
    assert count == 1 and "TFD006" in codes(gone[1])
    # A README that installs a Keras 2 TensorFlow, added where no file pins: read too.
    (root / "README.md").write_text("```\npip install tensorflow-gpu==2.4.1\n```\n")
    readme, count = check()
    assert count == 1 and "TFD006" not in codes(readme[1])


def notebook(cells: list[str]) -> str:
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": cell} for cell in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })


@pytest.mark.parametrize("install, reported", [("!pip install tensorflow==2.17.0", True), ("!pip install -q tensorflow-datasets", False)])
def test_a_notebook_that_installs_tensorflow_itself_runs_what_it_installs(tmp_path, monkeypatch, install, reported):
    root = project(tmp_path, "tf212", monkeypatch)
    script = (root / "train.py").read_text().split('"""', 2)[2]
    (root / "train.py").unlink()
    (root / "train.ipynb").write_text(notebook([install, script]))
    assert ("TFD006" in codes(run("check", "--no-cache", ".")[1])) is reported


def test_a_tfd001_finding_whose_fix_leaves_the_optimizer_outside_names_the_pin(tmp_path, monkeypatch):
    root = project(tmp_path, "optimizer_outside", monkeypatch)
    train = root / "train.py"
    train.write_text(train.read_text().replace(
        "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n",
        "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\nwith strategy.scope():\n",
    ))
    out = run("check", "--no-cache", ".")[1]
    assert codes(out) == ["TFD001"]
    assert "(environment.yml:6 pins tensorflow=2.11: Keras 2, which trains with the optimizer made outside the scope (line 8), so it stays there)" in out
    run("fix", "--no-cache", ".")
    assert "optimizer = tf.keras.optimizers.Adam(1e-3)\n\nwith strategy.scope():\n    model = tf.keras.Sequential(" in train.read_text()


def test_what_decides_is_named_with_its_place(tmp_path, monkeypatch):
    from autofix.analysis.facts.script import Facts
    from autofix.analysis.program import Program
    import libcst as cst

    def needs_keras2(path: Path) -> str | None:
        text = path.read_text()
        return Facts.of(Program(cst.parse_module(text), text, path=str(path))).needs_keras2

    root = project(tmp_path, "nested", monkeypatch)
    assert needs_keras2(root / "scripts" / "train.py") == (
        "its repository pins tensorflow==2.15.1 (requirements-worker.txt:1), whose Keras is Keras 2"
    )
    (root / "scripts" / "requirements-worker.txt").unlink()
    (root / "Makefile").write_text("train:\n\tpython3.8 scripts/train.py\n")
    (root / "requirements.txt").write_text("numpy\n")
    assert needs_keras2(root / "scripts" / "train.py") == (
        "its repository runs it with python3.8 (Makefile:2), on which no TensorFlow 2.16+ (Keras 3) installs: its Keras is Keras 2"
    )


# --- how the repository runs its programs: TF_USE_LEGACY_KERAS, manifests ---------------------


def test_the_runtime_formats(tmp_path):
    assert read_pins(tmp_path, "Dockerfile", """\
        FROM gcr.io/deeplearning-platform-release/tf2-gpu.2-4
        # ENV TF_USE_LEGACY_KERAS=0
        ENV PYTHONUNBUFFERED=1 TF_USE_LEGACY_KERAS 1
        FROM tensorflow/tensorflow:${TF_VERSION}
        """) == [(1, "FROM gcr.io/deeplearning-platform-release/tf2-gpu.2-4", 2), (3, "TF_USE_LEGACY_KERAS=1", 2)]
    assert read_pins(tmp_path, "run.sh", """\
        export TF_USE_LEGACY_KERAS=1
        TF_USE_LEGACY_KERAS=0 python eval.py
        export TF_USE_LEGACY_KERAS=$LEGACY
        echo $TF_USE_LEGACY_KERAS
        """) == [(1, "TF_USE_LEGACY_KERAS=1", 2), (2, "TF_USE_LEGACY_KERAS=0", 3)]
    assert read_pins(tmp_path, "Makefile", "export TF_USE_LEGACY_KERAS := True\nrun:\n\tpython main.py\n") == [(1, "TF_USE_LEGACY_KERAS=True", 2)]
    # TensorFlow takes "1", "true" and "True" as set; any other value it shows is not set.
    assert read_pins(tmp_path, ".env", "TF_USE_LEGACY_KERAS=yes\n") == [(1, "TF_USE_LEGACY_KERAS=yes", 3)]
    assert read_pins(tmp_path, "k8s.yaml", """\
        kind: Job
        spec:
          template:
            spec:
              containers:
                - image: tensorflow/tensorflow:2.4.1-gpu
                  command: ["sh", "-c", "pip install 'keras<3' && python3.7 train.py"]
                  env:
                    - name: TF_USE_LEGACY_KERAS
                      value: "1"
        """) == [(6, "image: tensorflow/tensorflow:2.4.1-gpu", 2), (7, "keras<3", 2), (7, "python3.7", 2), (9, "TF_USE_LEGACY_KERAS=1", 2)]
    assert read_pins(tmp_path, "vertex_job.yaml", """\
        workerPoolSpecs:
          - containerSpec:
              imageUri: us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest
        """) == [(3, "imageUri: us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest", 3)]
    assert read_pins(tmp_path, "docker-compose.yml", """\
        services:
          worker:
            image: python:3.11
            environment:
              TF_USE_LEGACY_KERAS: "1"
        """) == [(5, "TF_USE_LEGACY_KERAS=1", 2)]
    # A YAML file that names no image is no manifest: its commands are not read.
    assert read_pins(tmp_path, "config.yaml", "lr: 0.1\nrun: python3.7 train.py\n") == []


@pytest.mark.parametrize(
    "name, reported",
    [("docker_legacy", False), ("tfjob", False), ("conflicting", True), ("kubeflow_image", False), ("ai_platform", False)],
)
def test_how_the_repository_runs_its_program_decides_tfd006(tmp_path, monkeypatch, name, reported):
    """A Dockerfile that sets TF_USE_LEGACY_KERAS=1 over TensorFlow 2.17, a Kubeflow TFJob on
    the image of TensorFlow 2.4, a Dockerfile on Kubeflow's notebook image of TensorFlow 2.1
    (named for it: tensorflow-2.1.0-notebook-gpu), an AI Platform job configuration on runtime
    version 2.3: Keras 2, no TFD006. A Dockerfile on 2.11 beside a Kubernetes job on 2.17:
    nothing decided, the finding stays as without pins."""
    project(tmp_path, name, monkeypatch)
    code, out, _ = run("check", "--no-cache", ".")
    assert ("TFD006" in codes(out)) is reported and code == (1 if reported else 0)


def test_tf_use_legacy_keras_must_be_set_where_the_program_runs(tmp_path, monkeypatch):
    root = project(tmp_path, "docker_legacy", monkeypatch)
    dockerfile = root / "Dockerfile"
    text = dockerfile.read_text()
    # Without the variable, the image's TensorFlow 2.17 (Keras 3) decides, and is named.
    dockerfile.write_text(text.replace("ENV TF_USE_LEGACY_KERAS=1\n", ""))
    out = run("check", "--no-cache", ".")[1]
    assert "TFD006" in codes(out) and "Dockerfile:1 pins FROM tensorflow/tensorflow:2.17.0: Keras 3" in out
    # Set by the script that runs the program, or by a nearer folder's file, it counts too.
    (root / "run.sh").write_text("#!/bin/sh\nTF_USE_LEGACY_KERAS=1 python train.py\n")
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])
    (root / "run.sh").unlink()
    # A value TensorFlow does not take as set: Keras 3.
    dockerfile.write_text(text.replace("TF_USE_LEGACY_KERAS=1", "TF_USE_LEGACY_KERAS=0"))
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])
    # The variable switches tf.keras only: a program that imports keras stays on Keras 3.
    dockerfile.write_text(text)
    train = root / "train.py"
    train.write_text(train.read_text().replace("import tensorflow as tf\n", "import keras\nimport tensorflow as tf\n").replace("tf.keras.", "keras."))
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])


def test_editing_the_dockerfile_checks_the_file_again(tmp_path, monkeypatch, cached):
    root = project(tmp_path, "docker_legacy", monkeypatch)

    check = counting_check(cached)

    cold, count = check()
    assert count == 1 and "TFD006" not in codes(cold[1])
    warm, count = check()
    assert count == 0 and warm == cold
    dockerfile = root / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("TF_USE_LEGACY_KERAS=1", "TF_USE_LEGACY_KERAS=0"))
    edited, count = check()
    assert count == 1 and "TFD006" in codes(edited[1]) and edited == run("check", "--no-cache", ".")
    # A Kubernetes manifest added beside it, on TensorFlow 2.4's image, is read too.
    (root / "job.yaml").write_text("kind: Job\nspec:\n  containers:\n    - image: tensorflow/tensorflow:2.4.1\n")
    added, count = check()
    assert count == 1 and "TFD006" in codes(added[1])  # 2.17 (Dockerfile) and 2.4 (job.yaml) disagree
    dockerfile.unlink()
    removed, count = check()
    assert count == 1 and "TFD006" not in codes(removed[1]) and removed == run("check", "--no-cache", ".")


# --- Python job launchers -----------------------------------------------------------------------


def test_the_launcher_formats(tmp_path):
    assert read_pins(tmp_path, "job.py", """\
        env = Environment.get(workspace=ws, name="AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu")
        """) == [(1, "AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu", 2)]
    assert read_pins(tmp_path, "launch.py", """\
        from sagemaker.tensorflow import TensorFlow
        estimator = TensorFlow(entry_point="train.py", framework_version="2.3.1", py_version="py37")
        other = TensorFlow(entry_point="new.py", framework_version='2.16')
        """) == [(2, 'framework_version="2.3.1"', 2), (3, "framework_version='2.16'", 3)]
    assert read_pins(tmp_path, "vertex.py", """\
        job = aiplatform.CustomTrainingJob(container_uri="us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest")
        op = dsl.ContainerOp(image="tensorflow/tensorflow:2.4.1-gpu")
        """) == [(1, "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest", 2), (2, "tensorflow/tensorflow:2.4.1-gpu", 2)]
    # What is no launcher's: a version argument outside SageMaker, an image without a version,
    # prose, an ordinary script.
    assert read_pins(tmp_path, "tool.py", 'framework_version = "2.3"\nIMAGE = "tensorflow/tensorflow:latest-gpu"\n# runs on tensorflow/tensorflow:2.4.0\n') == []
    assert read_pins(tmp_path, "train.py", "import tensorflow as tf\nmodel = tf.keras.Sequential()\n") == []


def test_a_job_launcher_on_tensorflow_2_4_silences_tfd006(tmp_path, monkeypatch):
    root = project(tmp_path, "azureml_job", monkeypatch)
    code, out, _ = run("check", "--no-cache", ".")
    assert "TFD006" not in codes(out)
    # The environment renamed to a Keras 3 one, or the launcher gone: TFD006.
    job = root / "job.py"
    job.write_text(job.read_text().replace("AzureML-tensorflow-2.4-", "AzureML-tensorflow-2.16-"))
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])
    job.unlink()
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])


def test_only_files_named_as_launchers_are_read(tmp_path, monkeypatch):
    """A pin file's edit re-checks every file below its folder: ordinary modules are not read
    for pins, whatever strings they hold."""
    root = project(tmp_path, "azureml_job", monkeypatch)
    (root / "job.py").rename(root / "workspace_utils.py")
    assert "TFD006" in codes(run("check", "--no-cache", ".")[1])
    (root / "workspace_utils.py").rename(root / "submit_training.py")
    assert "TFD006" not in codes(run("check", "--no-cache", ".")[1])


def test_adding_a_launcher_checks_the_file_again(tmp_path, monkeypatch):
    root = project(tmp_path, "azureml_job", monkeypatch)
    job = (root / "job.py").read_text()
    (root / "job.py").unlink()
    assert "TFD006" in codes(run("check", ".")[1])
    (root / "job.py").write_text(job)
    assert "TFD006" not in codes(run("check", ".")[1])


def test_a_package_is_run_as_its_repository_runs_it(tmp_path, monkeypatch):
    """The package's root (setup.py) holds no pin; the repository's Dockerfile above it runs it on
    TensorFlow 2.3.1: Keras 2, no TFD006. Without a repository root (.git) above the package
    the Dockerfile is not its repository's, and a pin of the package's own decides first."""
    root = project(tmp_path, "package_in_repository", monkeypatch)
    assert "TFD006" in codes(run("check", "--no-cache", "multi-worker/trainer/task.py")[1])
    (root / ".git").mkdir()
    assert "TFD006" not in codes(run("check", "--no-cache", "multi-worker/trainer/task.py")[1])
    (root / "multi-worker" / "requirements.txt").write_text("tensorflow==2.17.0\n")
    assert "TFD006" in codes(run("check", "--no-cache", "multi-worker/trainer/task.py")[1])


@pytest.mark.parametrize(
    "name, edited, says",
    [
        ("kubeflow_image", ("Dockerfile", "tensorflow-2.1.0-notebook-gpu", "tensorflow-2.17.0-notebook-gpu"), "Dockerfile:1 pins FROM gcr.io/kubeflow-images-public/tensorflow-2.17.0-notebook-gpu:1.0.0: Keras 3"),
        ("ai_platform", ("config.yaml", 'runtimeVersion: "2.3"', 'runtimeVersion: "2.17"'), 'config.yaml:6 pins runtimeVersion: "2.17": Keras 3'),
    ],
)
def test_an_image_named_for_its_tensorflow_and_an_ai_platform_runtime_pin_both_ways(tmp_path, monkeypatch, name, edited, says):
    """The same repositories on TensorFlow 2.17 (Keras 3): TFD006, naming the pin."""
    root = project(tmp_path, name, monkeypatch)
    file, old, new = edited
    path = root / file
    path.write_text(path.read_text().replace(old, new))
    out = run("check", "--no-cache", ".")[1]
    assert "TFD006" in codes(out) and says in out, out
