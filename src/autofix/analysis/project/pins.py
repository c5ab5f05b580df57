"""Which Keras a file's repository runs it with, as the repository's own files pin it.

A repository says which TensorFlow its programs run on outside their Python code: a
``requirements*.txt`` line (``tensorflow==2.11``, ``tensorflow<2.16``, ``keras<3``), the
dependencies of ``setup.py``, ``setup.cfg`` or ``pyproject.toml``, a conda ``environment.yml``
(``tensorflow=2.11``, ``python=3.7``), a Dockerfile's base image (``FROM
tensorflow/tensorflow:2.11.0-gpu``, ``FROM python:3.8``) or its ``RUN pip install``, and the
``pip install`` lines, Python interpreters (``python3.7 main.py``) and HPC environment modules
(``module load TensorFlow/2.11.0-foss-2022a-CUDA-11.7.0``, Lmod's ``ml``) of its shell scripts
and Makefile, the environment a Python job launcher (a file named so: ``job.py``,
``submit_training.py``, ``sagemaker_launch.py``) runs its scripts in (an Azure ML curated
environment ``AzureML-tensorflow-2.4-...``, a SageMaker estimator's ``framework_version=``, an
image named in a string: ``tensorflow/tensorflow:2.4.1-gpu``, Vertex AI's ``tf-gpu.2-4``); and,
when none of those pins one, the install commands a README gives
(``pip install tf-nightly-2.0-preview``, ``pip install tensorflow==2.1``, a requirement line
``tensorflow-gpu==2.0.0`` in a code block; never its prose). TensorFlow 2.16 made Keras 3 its Keras, and Keras 3.0 is Keras 3: a pin that allows
only older versions (or a Python older than 3.9, on which no TensorFlow 2.16 installs) means
the file runs Keras 2 as its repository runs it; a pin that allows only newer ones means
Keras 3.

:func:`keras_pin` reads the folders from the file's own up to its project's root
(:func:`~.layout.project_root`): the nearest folder whose files pin a version decides (a
requirements file nearer the script wins over the root's); when that folder's files disagree,
nothing is decided. Only when no folder up to the root has a pin, the nearest README that
names a TensorFlow to install decides (the same way). A file given alone (no path) has no
project and no pin.

What is read is recorded as :func:`~.imports.reading` says: every file looked at, with its
digest, and each folder's list of the files that may pin (``folder/`` with the digest of the
names, :func:`~.layout.pin_listing`), so that editing, adding or removing a requirements file
re-checks the files it decides for.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from autofix.analysis.project import layout
from autofix.analysis.project.imports import _read, record

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

# Distributions whose version says which Keras ``tf.keras`` (and ``import keras``) is.
TENSORFLOW = frozenset({"tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel", "tensorflow-aarch64", "intel-tensorflow"})
KERAS = "keras"
PYTHON = "python"
# The environment variable that makes ``tf.keras`` Keras 2 (tf_keras) on TensorFlow 2.16+; a
# :class:`Pin` of this subject is a setting of it (Keras 2: set to 1; Keras 3: set to 0).
LEGACY = "TF_USE_LEGACY_KERAS"

# Versions probed against a specifier: those whose Keras is Keras 2 and those whose is Keras 3.
_OLD = {
    "tensorflow": [f"1.{m}.0" for m in range(16)] + [f"2.{m}.{p}" for m in range(16) for p in range(5)],
    "keras": [f"1.{m}.0" for m in range(3)] + [f"2.{m}.{p}" for m in range(16) for p in range(5)],
    # No TensorFlow 2.16 (Keras 3) installs on a Python older than 3.9.
    "python": ["2.7"] + [f"3.{m}" for m in range(9)] + [f"3.{m}.{p}" for m in range(5, 9) for p in range(20)],
}
_NEW = {
    "tensorflow": [f"2.{m}.{p}" for m in range(16, 40) for p in range(4)] + ["3.0.0"],
    "keras": [f"3.{m}.{p}" for m in range(30) for p in range(4)] + ["4.0.0"],
    "python": [f"3.{m}" for m in range(9, 20)] + [f"3.{m}.{p}" for m in range(9, 15) for p in range(20)] + ["4.0"],
}


@dataclass(frozen=True)
class Pin:
    """One pin of a repository file: where it is, as written, and the Keras it means (2 or 3)."""

    path: str
    line: int
    text: str
    keras: int
    # What the pin is about: "tensorflow", "keras" or "python".
    subject: str

    @property
    def verb(self) -> str:
        """What the file does with the version: a README ``installs`` it, other files ``pins``."""
        return "installs" if layout.is_readme(os.path.basename(self.path)) else "pins"

    def where(self, importer: str | None = None) -> str:
        """``requirements.txt:3``, relative to the importing file's folder when the pin is there
        or below, else to the project's root."""
        shown = self.path
        if importer is not None:
            here = os.path.dirname(os.path.abspath(importer))
            base = here if layout.inside(self.path, here) else layout.project_root(importer)
            try:
                shown = os.path.relpath(self.path, base)
            except ValueError:
                pass
        return f"{shown}:{self.line}"

    def reason(self, importer: str | None = None) -> str:
        """Why the file runs this Keras: ``requirements.txt:3 pins tensorflow==2.12, whose
        Keras is Keras 2``."""
        where = self.where(importer)
        if layout.is_readme(os.path.basename(self.path)):
            return f"its repository's README installs {self.text} ({where}), whose Keras is Keras {self.keras}"
        if self.subject == LEGACY:
            return f"its repository runs it with {self.text} ({where}): its tf.keras is Keras 2 (tf_keras)"
        if self.subject == PYTHON:
            return f"its repository runs it with {self.text} ({where}), on which no TensorFlow 2.16+ (Keras 3) installs: its Keras is Keras 2"
        return f"its repository pins {self.text} ({where}), whose Keras is Keras {self.keras}"


def keras_pin(path: str | None) -> Pin | None:
    """The pin that decides which Keras the file ``path`` runs as its repository runs it: that
    of the nearest folder (the file's own, up to its project's root) whose files pin one; None
    when none does, when that folder's files disagree, or for a file given alone."""
    folders = _folders(path)
    found = _nearest(folders, lambda pin: pin.subject != LEGACY)
    if found is not _NONE:
        return found
    # No pin file anywhere: what a README says to install (nearest first).
    found = _nearest(folders, lambda pin: True, readme=True)
    return None if found is _NONE else found


def legacy_keras(path: str | None) -> Pin | None:
    """Where the repository's way of running the file ``path`` sets ``TF_USE_LEGACY_KERAS=1``
    (a Dockerfile's ``ENV``, an ``export`` or a ``TF_USE_LEGACY_KERAS=1 python ...`` of a shell
    script or Makefile, ``.env``, a compose file's or Kubernetes manifest's ``environment``):
    there ``tf.keras`` is Keras 2 (tf_keras), whatever TensorFlow runs; ``import keras`` is
    not changed. The nearest folder that sets the variable decides; None when none does, when
    it sets it to 0, or when its files disagree."""
    found = _nearest(_folders(path), lambda pin: pin.subject == LEGACY)
    return None if found is _NONE or found is None or found.keras != 2 else found


# ``_nearest`` found no folder that says anything.
_NONE = Pin("", 0, "", 0, "")


def _folders(path: str | None) -> list[str]:
    """The folders from the file's own up to its project's root (none for a file given alone)."""
    if path is None:
        return []
    path = os.path.abspath(path)
    root = layout.project_root(path)
    folder = os.path.dirname(path)
    if not layout.inside(folder, root):
        return []
    folders = []
    while True:
        folders.append(folder)
        if folder == root:
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folders + _above_package(root)


# How far above a package's root its repository's root is looked for (folders).
_REPOSITORY_DEPTH = 4


def _above_package(root: str) -> list[str]:
    """The folders above a project root that a package marker (``setup.py``, ``pyproject.toml``)
    makes, up to the repository's root (the nearest folder above holding ``.git``), when there
    is one: a repository's Dockerfile or requirements that build and run the package
    (``COPY multi-worker/trainer/ trainer/`` on ``FROM tensorflow/tensorflow:2.3.1``) pin what it
    runs on, where the package's own folders say nothing (the nearest folder that does decides)."""
    if os.path.exists(os.path.join(root, ".git")):
        return []
    above: list[str] = []
    folder = root
    for _ in range(_REPOSITORY_DEPTH):
        parent = os.path.dirname(folder)
        if parent == folder:
            return []
        above.append(parent)
        if os.path.exists(os.path.join(parent, ".git")):
            return above
        folder = parent
    return []


def _nearest(folders: list[str], wanted, readme: bool = False) -> Pin | None:
    """The pin of the nearest folder whose files say something ``wanted`` (None when they
    disagree), or :data:`_NONE` when no folder does. Folders are read (and recorded) in order,
    up to the one that decides."""
    for folder in folders:
        found = [pin for pin in _folder_pins(folder, readme) if wanted(pin)]
        if found:
            kinds = {pin.keras for pin in found}
            return found[0] if len(kinds) == 1 else None
    return _NONE


def keras2_pin(path: str | None) -> Pin | None:
    """:func:`keras_pin` when it means Keras 2."""
    pin = keras_pin(path)
    return pin if pin is not None and pin.keras == 2 else None


def _folder_pins(folder: str, readme: bool = False) -> list[Pin]:
    """The pins of the files in ``folder`` that may pin (the listing is recorded): its READMEs'
    when ``readme``, else its other files'."""
    names = layout.pin_files(folder)
    record(folder.rstrip(os.sep) + os.sep, layout.digest("\n".join(names).encode("utf-8")))  # = pin_listing
    found: list[Pin] = []
    for name in names:
        if layout.is_readme(name) != readme:
            continue
        candidate = os.path.join(folder, name)
        read = _read(candidate)
        if read is None:
            continue
        found.extend(Pin(candidate, line, text, keras, subject) for line, text, keras, subject in _pins_of(name, read[1], read[0]))
    return found


@lru_cache(maxsize=1024)
def _pins_of(name: str, key: str, data: bytes) -> tuple[tuple[int, str, int, str], ...]:
    """(line, requirement as written, Keras 2 or 3, subject) of the file named ``name``; a
    setting of ``TF_USE_LEGACY_KERAS`` is one of subject :data:`LEGACY`."""
    text = data.decode("utf-8", errors="replace")
    lower = name.lower()
    settings: list[tuple[int, str, int]] = []
    if layout.is_readme(name):
        items = _readme(text)
    elif lower == "pyproject.toml":
        items = _pyproject(text)
    elif lower == "setup.py":
        items = _strings(text)
    elif lower.endswith(".py"):
        items = _launcher(text)
    elif lower.endswith((".yml", ".yaml")) and lower.startswith(("environment", "conda")):
        items = _conda(text)
    elif lower.endswith((".yml", ".yaml")):
        items = _manifest(text)
        settings = _legacy_settings(text)
    elif "dockerfile" in lower:
        items = _dockerfile(text)
        settings = _legacy_settings(text)
    elif lower.endswith(".sh") or lower in ("makefile", "gnumakefile"):
        items = _commands(text)
        settings = _legacy_settings(text)
    elif lower == ".env":
        items = []
        settings = _legacy_settings(text)
    else:  # requirements*.txt, setup.cfg
        items = _requirement_lines(text)
    found = []
    for line, written, *shown in items:
        meaning = _meaning(written)
        if meaning is not None:
            found.append((line, shown[0] if shown else written, *meaning))
    found.extend((line, shown, keras, LEGACY) for line, shown, keras in settings)
    return tuple(sorted(found))


# --- what one requirement means ------------------------------------------------------------------


def _meaning(written: str) -> tuple[int, str] | None:
    """(Keras 2 or 3, subject) for a requirement on TensorFlow, Keras or Python whose versions
    are all older, or all newer, than the first with Keras 3; None otherwise."""
    try:
        requirement = Requirement(written)
    except InvalidRequirement:
        return None
    name = requirement.name.lower().replace("_", "-")
    preview = _PREVIEW.fullmatch(name)
    if preview is not None:
        # ``tf-nightly-2.0-preview`` (``==2.0.0.dev20190526``): the nightly builds of one
        # release, named for it.
        return _keras_of("tensorflow", SpecifierSet(f"=={preview.group(1)}.*"))
    subject = "tensorflow" if name in TENSORFLOW else name if name in (KERAS, PYTHON) else None
    if subject is None or not requirement.specifier:
        return None
    return _keras_of(subject, requirement.specifier)


# The nightly builds TensorFlow published under a release's name (``tf-nightly-gpu-2.0-preview``).
_PREVIEW = re.compile(r"tf-nightly(?:-gpu|-cpu)?-(\d+\.\d+)-preview")
# The first version whose Keras is Keras 3, by subject (a Python says nothing of Keras 3).
_FIRST_NEW = {"tensorflow": Version("2.16"), "keras": Version("3.0"), "python": Version("3.9")}


def keras_of_versions(subject: str, allowed) -> int | None:
    """The Keras (2 or 3) of every version of ``subject`` ("tensorflow" or "keras") for which
    ``allowed`` (a test of the version as ``__version__`` spells it, ``"2.15.0"``) holds, or
    None when it holds for versions of both (or of none)."""
    old = any(allowed(v) for v in _OLD[subject])
    new = any(allowed(v) for v in _NEW[subject])
    return 2 if old and not new else 3 if new and not old else None


def _keras_of(subject: str, specifier: SpecifierSet) -> tuple[int, str] | None:
    old = any(specifier.contains(v, prereleases=True) for v in _OLD[subject])
    new = any(specifier.contains(v, prereleases=True) for v in _NEW[subject])
    for exact in specifier:
        # ``==2.0.0-alpha0``, ``==2.0.0rc1``: a pre-release the probes do not hold.
        if exact.operator in ("==", "===") and "*" not in exact.version:
            try:
                version = Version(exact.version)
            except InvalidVersion:
                continue
            if specifier.contains(version, prereleases=True):
                old = old or version < _FIRST_NEW[subject]
                new = new or version >= _FIRST_NEW[subject]
    if old and not new:
        return 2, subject
    if new and not old and subject != PYTHON:
        # (A Python 3.9+ runs TensorFlow 2.15 as well: it says nothing of Keras 3.)
        return 3, subject
    return None


# --- the formats -------------------------------------------------------------------------------


# Each format gives (line, requirement) or (line, requirement, as written where it differs).


def _requirement_lines(text: str) -> list[tuple[int, str]]:
    """``requirements.txt`` lines, and the requirements of ``setup.cfg`` (one per line, or
    after ``install_requires =``)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if not line or line.startswith(("#", "-", "[")):
            continue
        option = re.match(r"[\w.-]+\s*=\s*(.*)$", line)
        if option is not None and not re.match(r"[\w.-]+\s*==", line):
            line = option.group(1).strip()
        found.append((number, line))
    return found


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _strings(text: str) -> list[tuple[int, str]]:
    """Every string literal of ``setup.py`` that may be a requirement."""
    return [(_line_of(text, m.start()), m.group(2).strip()) for m in re.finditer(r"""(['"])([^'"\n]{1,200})\1""", text)]


def _pyproject(text: str) -> list[tuple[int, str]]:
    """PEP 621 ``dependencies`` and ``requires-python``, Poetry's dependencies."""
    try:
        data = tomllib.loads(text)
    except Exception:  # a file that does not parse pins nothing
        return []
    found: list[tuple[int, str]] = []

    def at(needle: str) -> int:
        offset = text.find(needle)
        return _line_of(text, offset) if offset >= 0 else 1

    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    for item in project.get("dependencies", []) or []:
        if isinstance(item, str):
            found.append((at(item), item))
    python = project.get("requires-python")
    if isinstance(python, str):
        found.append((at(python), f"python{python}"))
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    dependencies = poetry.get("dependencies", {}) if isinstance(poetry, dict) else {}
    for name, value in (dependencies.items() if isinstance(dependencies, dict) else ()):
        version = value.get("version") if isinstance(value, dict) else value
        if isinstance(version, str):
            specifier = _poetry(version)
            if specifier is not None:
                found.append((at(f"{name}"), f"{name}{specifier}"))
    return found


def _poetry(version: str) -> str | None:
    """A Poetry constraint (``^2.11``, ``~2.11``, ``2.11.0``, ``>=2.10,<2.16``) as a PEP 440
    specifier."""
    version = version.strip()
    if version in ("", "*"):
        return None
    match = re.fullmatch(r"([\^~])\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    if match is not None:
        kind, major, minor, patch = match.groups()
        base = ".".join(p for p in (major, minor, patch) if p is not None)
        if kind == "^":
            upper = f"{int(major) + 1}.0" if int(major) else f"0.{int(minor or 0) + 1}"
        else:
            upper = f"{major}.{int(minor) + 1}" if minor is not None else f"{int(major) + 1}.0"
        return f">={base},<{upper}"
    if re.fullmatch(r"\d+(\.\d+)*(\.\*)?", version):
        return f"=={version}"
    try:
        SpecifierSet(version)
    except InvalidSpecifier:
        return None
    return version


def _conda(text: str) -> list[tuple[int, str, str]]:
    """The dependencies of a conda ``environment.yml``: ``- tensorflow=2.11`` (conda's ``=``
    means the release and its patches), ``- tensorflow-gpu==2.4.1``, its ``pip:`` list."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"\s*-\s*['\"]?([A-Za-z0-9_.-]+)\s*(.*?)['\"]?\s*(?:#.*)?$", line)
        if match is None:
            continue
        name, spec = match.group(1), match.group(2).strip()
        conda = re.fullmatch(r"=\s*([\d.*]+)(?:=\S+)?", spec)
        if conda is not None:
            version = conda.group(1).rstrip(".*")
            spec = f"=={version}.*" if version else ""
        found.append((number, f"{name}{spec}", f"{name}{match.group(2).strip()}"))
    return found


# ``FROM tensorflow/tensorflow:2.11.0-gpu``, ``FROM python:3.8-slim`` (the image, then its tag).
_FROM = re.compile(r"(?im)^[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*(\S+)")
# An image named in a YAML manifest: Kubernetes, a Kubeflow TFJob (``image:``), compose,
# Vertex AI (``imageUri:``, ``image_uri:``).
_IMAGE_KEY = re.compile(r"(?im)^[ \t]*(?:-[ \t]*)?(?:image|imageUri|image_uri|imageURI)[ \t]*:[ \t]*['\"]?([^\s'\"#]+)")
# Google's prebuilt TensorFlow containers (Vertex AI training and prediction, Deep Learning
# Containers), named for the release: ``tf-gpu.2-11``, ``tf2-cpu.2-4``.
_PREBUILT = re.compile(r"tf2?-(?:cpu|gpu)\.(\d+)-(\d+)(?![\d-])")
_PIP = re.compile(r"\bpip3?\s+install\b(.*)")
# A Python interpreter run by version: ``python3.7 main.py``.
_PYTHON = re.compile(r"(?<![\w/.-])(?:\S*/)?python(\d\.\d+)(?![\w.])")


def _image(reference: str) -> str | None:
    """The requirement a container image stands for: ``tensorflow/tensorflow:2.11.0-gpu``
    (``tensorflow==2.11.0``), ``python:3.8-slim`` (``python==3.8.*``), a prebuilt
    ``.../tf-gpu.2-11.py310:latest`` (``tensorflow==2.11.*``); None for another image, or a tag
    that names no version (``latest``, ``nightly``, ``${TF_VERSION}``)."""
    name, _, tag = reference.rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    name = re.sub(r"^(?:index\.)?docker\.io/", "", name.lower())
    name = re.sub(r"^library/", "", name)
    if name in ("tensorflow/tensorflow", "python"):
        version = re.match(r"(\d+(?:\.\d+)*)(?![\w.])|(\d+(?:\.\d+)*)-", tag)
        if version is None:
            return None
        number = version.group(1) or version.group(2)
        if name == "python":
            return f"python=={number}.*"
        return f"tensorflow=={number}.*" if number.count(".") < 2 else f"tensorflow=={number}"
    prebuilt = _PREBUILT.search(name.rsplit("/", 1)[-1])
    if prebuilt is not None:
        return f"tensorflow=={prebuilt.group(1)}.{prebuilt.group(2)}.*"
    named = _NAMED_IMAGE.match(name.rsplit("/", 1)[-1])
    if named is not None:
        return f"tensorflow=={named.group(1)}" if named.group(1).count(".") == 2 else f"tensorflow=={named.group(1)}.*"
    return None


# An image named for the TensorFlow it holds: Kubeflow's notebook images
# (``gcr.io/kubeflow-images-public/tensorflow-2.1.0-notebook-gpu:1.0.0``), ``tensorflow-2.4-gpu``.
_NAMED_IMAGE = re.compile(r"tensorflow(?:-gpu|-cpu)?[-_](\d+\.\d+(?:\.\d+)?)(?![\d.])(?:[-_.]|$)")


def _dockerfile(text: str) -> list[tuple]:
    found: list[tuple] = []
    for match in _FROM.finditer(text):
        requirement = _image(match.group(1))
        if requirement is not None:
            shown = text[match.start():].splitlines()[0].strip()
            found.append((_line_of(text, match.start()), requirement, shown))
    return found + _commands(text)


# What a Python job launcher runs its training scripts on: an Azure ML curated environment
# (``Environment.get(ws, name="AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu")``), a
# SageMaker TensorFlow estimator's ``framework_version="2.3.1"``, a container image given by
# name (``image_uri="tensorflow/tensorflow:2.4.1-gpu"``, Vertex AI's prebuilt
# ``.../tf-gpu.2-4:latest``).
_AZUREML_ENVIRONMENT = re.compile(r"""['"]AzureML-tensorflow-(\d+\.\d+)[\w.-]*['"]""", re.IGNORECASE)
_FRAMEWORK_VERSION = re.compile(r"""\bframework_version\s*=\s*['"](\d+\.\d+(?:\.\d+)?)['"]""")
_IMAGE_STRING = re.compile(r"""['"]((?:[\w.-]+/)*(?:tensorflow/tensorflow:[^'"\s]+|[\w.-]*tf-(?:cpu|gpu)\.\d+-\d+[^'"\s]*))['"]""")


def _launcher(text: str) -> list[tuple]:
    """The TensorFlow a Python launcher of training jobs runs them on (see above); nothing
    for other Python files (a launcher must use Azure ML, SageMaker or name an image)."""
    found: list[tuple] = []
    for match in _AZUREML_ENVIRONMENT.finditer(text):
        found.append((_line_of(text, match.start()), f"tensorflow=={match.group(1)}.*", match.group(0).strip("'\"")))
    if "sagemaker" in text:
        for match in _FRAMEWORK_VERSION.finditer(text):
            version = match.group(1)
            requirement = f"tensorflow=={version}.*" if version.count(".") < 2 else f"tensorflow=={version}"
            found.append((_line_of(text, match.start()), requirement, match.group(0)))
    for match in _IMAGE_STRING.finditer(text):
        requirement = _image(match.group(1))
        if requirement is not None:
            found.append((_line_of(text, match.start()), requirement, match.group(1)))
    return found


def _manifest(text: str) -> list[tuple]:
    """A YAML manifest's images (a Kubernetes pod or job, a Kubeflow ``TFJob``, a compose
    service, a Vertex AI job: ``image: tensorflow/tensorflow:2.4.1-gpu``), an AI Platform
    training job's runtime (``trainingInput: runtimeVersion: "2.3"``: TensorFlow 2.3) and, in
    one that names an image, the ``pip install`` and versioned interpreters of its commands."""
    found: list[tuple] = []
    for match in _IMAGE_KEY.finditer(text):
        requirement = _image(match.group(1))
        if requirement is not None:
            found.append((_line_of(text, match.start()), requirement, match.group(0).strip().lstrip("- ")))
    for match in _RUNTIME_VERSION.finditer(text):
        found.append((_line_of(text, match.start()), f"tensorflow=={match.group(1)}.*", match.group(0).strip()))
    if _IMAGE_KEY.search(text) is not None:
        found.extend(_commands(text))
    return found


# AI Platform (Cloud ML Engine) Training's runtime version, in the job's configuration: its
# TensorFlow (runtime versions 1.x and 2.x are TensorFlow's).
_RUNTIME_VERSION = re.compile(r"""(?m)^[ \t]*runtimeVersion[ \t]*:[ \t]*['"]?(\d+\.\d+)['"]?[ \t]*(?:#.*)?$""")


# A setting of TF_USE_LEGACY_KERAS on one line: ``ENV TF_USE_LEGACY_KERAS=1`` (or ``... 1``),
# ``export TF_USE_LEGACY_KERAS=1``, ``TF_USE_LEGACY_KERAS=1 python train.py``, a Makefile's
# ``export TF_USE_LEGACY_KERAS := 1``, ``.env``'s ``TF_USE_LEGACY_KERAS=1``, compose's
# ``TF_USE_LEGACY_KERAS: "1"`` or ``- TF_USE_LEGACY_KERAS=1``.
_SETS = re.compile(r"(?<![\w$])TF_USE_LEGACY_KERAS['\"]?(?:[ \t]*:?=[ \t]*|[ \t]*:[ \t]*|[ \t]+)['\"]?([^\s'\";&|)#]*)")
# Kubernetes' ``- name: TF_USE_LEGACY_KERAS`` (its ``value:`` on the next line).
_NAMED = re.compile(r"^[ \t]*(?:-[ \t]*)?name[ \t]*:[ \t]*['\"]?TF_USE_LEGACY_KERAS['\"]?[ \t]*$")
_VALUE = re.compile(r"^[ \t]*value[ \t]*:[ \t]*['\"]?([^\s'\"#]*)")
# What TensorFlow takes as set (``os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True",
# "1")`` in its ``__init__.py`` and ``lazy_loader.py``); any other value is not.
_ON = frozenset({"1", "true", "True"})


def _legacy_settings(text: str) -> list[tuple[int, str, int]]:
    """(line, as written, Keras 2 or 3) for each line that sets ``TF_USE_LEGACY_KERAS``: to what
    TensorFlow takes as set (``tf.keras`` is Keras 2), or to another value it shows (``0``:
    it is not); comments, and values read from elsewhere (``$VAR``), are not read."""
    found: list[tuple[int, str, int]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):
            continue
        value: str | None = None
        named = _NAMED.match(line)
        if named is not None:
            following = next((later for later in lines[number:] if later.strip()), "")
            setting = _VALUE.match(following)
            value = setting.group(1) if setting is not None else None
        else:
            match = _SETS.search(line.split(" #", 1)[0])
            value = match.group(1) if match is not None else None
        if value is None or any(mark in value for mark in "$%{}(<"):
            continue  # a value the file does not show (``$LEGACY``, ``${LEGACY:-1}``)
        found.append((number, f"{LEGACY}={value}", 2 if value in _ON else 3))
    return found


def _commands(text: str) -> list[tuple]:
    """``pip install`` requirements and versioned Python interpreters of shell lines (a
    Dockerfile's ``RUN``, a shell script, a Makefile's recipes); continued lines joined."""
    found: list[tuple] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start = number
        line = lines[number]
        while line.rstrip().endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line.rstrip()[:-1] + " " + lines[number]
        number += 1
        if line.lstrip().startswith("#"):
            continue
        for part in re.split(r"&&|;|\|\|", line):
            match = _PIP.search(part)
            if match is not None:
                for word in match.group(1).split():
                    word = word.strip("'\"[](),")
                    if word and not word.startswith("-"):
                        found.append((start + 1, word))
            for interpreter in _PYTHON.finditer(part):
                found.append((start + 1, f"python=={interpreter.group(1)}.*", f"python{interpreter.group(1)}"))
            for module in _MODULE_LOAD.finditer(part):
                # An HPC cluster's environment module (Lmod / Environment Modules, EasyBuild's
                # names): ``module load TensorFlow/2.11.0-foss-2022a-CUDA-11.7.0`` is that
                # release of TensorFlow; ``ml Horovod/...-TensorFlow-2.11.0`` builds on it.
                for name in module.group(1).split():
                    version = _MODULE_TENSORFLOW.search(name)
                    if version is not None:
                        found.append((start + 1, f"tensorflow=={version.group(1)}", name))
    return found


# ``module load A B/1.2`` / ``module add`` / Lmod's ``ml A``: the modules a job script loads.
_MODULE_LOAD = re.compile(r"(?:^|\s)(?:module\s+(?:load|add|switch|swap)|ml)\s+((?:[^\s;&|#]+\s*)+)")
# A module of TensorFlow named with its release: ``TensorFlow/2.11.0-foss-2022a``,
# ``tensorflow-gpu/2.4.1``, ``Horovod/0.28.1-...-TensorFlow-2.11.0``.
_MODULE_TENSORFLOW = re.compile(r"(?i)tensorflow(?:-gpu|-cpu)?[/-](\d+\.\d+(?:\.\d+)?)(?![\d.])")


# A README line that runs an installer: ``pip install``, ``pip3 install``, ``python -m pip
# install``, ``conda install`` (after a prompt: ``$``, ``!``, ``%``, ``>>>``, ``sudo``).
_INSTALL = re.compile(r"^(?:[$>!%]+\s*|sudo\s+)*(?:\S*python[\d.]*\s+-m\s+)?(?:pip3?|conda)\s+install\b(.*)$")
# A code block line that is a requirement alone, as a requirements file writes it, bulleted or not.
_REQUIREMENT_LINE = re.compile(r"^(?:[-*+]\s+)?([A-Za-z0-9][\w.-]*\s*(?:===?|~=|!=|<=?|>=?)\s*[\w.*+!-]+(?:\s*,\s*(?:===?|~=|!=|<=?|>=?)\s*[\w.*+!-]+)*)$")


def _readme(text: str) -> list[tuple]:
    """What a README says to install: the requirements of its install commands (a line of a
    code block, fenced or indented, or a span of inline code) and the lines of its code
    blocks that are a requirement alone (``tensorflow-gpu==2.0.0``). Prose is not read:
    "tested with TensorFlow 2.1" pins nothing."""
    found: list[tuple] = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker is not None and marker.group(1) in stripped[len(marker.group(1)):]:
            marker = None  # ````` ```MirroredStrategy``` is ... `````: inline code, not a fence
        if marker is not None:
            if fence is None:
                fence = marker.group(1)[0]
            elif stripped.startswith(fence * 3):
                fence = None
            continue
        code = fence is not None or line.startswith(("    ", "\t"))
        pieces = [stripped] if code else re.findall(r"`+([^`]+)`+", line)
        for piece in pieces:
            piece = piece.strip()
            installs = [_INSTALL.match(part.strip()) for part in re.split(r"&&|;|\|\|", piece)]
            for install in filter(None, installs):
                conda = re.search(r"\bconda\s+install\b", install.group(0)) is not None
                for word in install.group(1).split():
                    word = word.strip("'\"")
                    if word.startswith("#"):
                        break
                    if not word or word.startswith("-"):
                        continue
                    single = re.fullmatch(r"([A-Za-z0-9][\w.-]*)=([\d.*]+)", word) if conda else None
                    if single is not None:  # conda's ``tensorflow=2.1``: the release and its patches
                        found.append((number, f"{single.group(1)}=={single.group(2).rstrip('.*')}.*", word))
                    else:
                        found.append((number, word))
            if code and not any(installs):
                requirement = _REQUIREMENT_LINE.match(piece)
                if requirement is not None:
                    found.append((number, requirement.group(1).replace(" ", "")))
    return found
