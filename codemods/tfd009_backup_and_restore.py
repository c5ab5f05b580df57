"""TFD009 backup-and-restore (suggestion): multi-worker ``fit`` with no way to resume.

When one worker of a ``MultiWorkerMirroredStrategy`` cluster fails, the others stop at their
next collective, and the whole training starts again from the beginning.
``keras.callbacks.BackupAndRestore(backup_dir)`` backs the training state up at each epoch and
resumes from it when the cluster restarts. On Keras 2 (tf_keras) it already handles several
workers (measured: the chief writes ``backup_dir/chief``, the other workers a temporary folder
they delete). This is a suggestion, shown by ``check`` without failing it.

The fix (``--unsafe-fixes``, since a restarted run then resumes instead of starting over) adds
``BackupAndRestore(backup_dir=os.path.join(D, "backup"))`` to ``fit``'s callbacks when they are
a list that already holds a ``ModelCheckpoint`` writing into ``os.path.join(D, ...)``: the backup
goes beside the checkpoints, in a folder of its own (the callback deletes it when training ends).

Not findings: Keras 3 (its ``fit`` fails under this strategy, see TFD006; its
``BackupAndRestore`` does not handle several workers, measured), a file that already uses
``BackupAndRestore`` or restores a checkpoint or weights, ``fit`` with ``initial_epoch=``, a
strategy with one worker, custom training loops (use a ``CheckpointManager`` there).

Not fixed (reported with the reason): a ``fit`` whose checkpoint folder is not known; choosing a
folder every worker can reach is for you.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker
from autofix.analysis.syntax import argument, argument_value
from autofix.analysis.training.model import TrainingModel
from autofix.codegen import NotFound, module_alias
from autofix.rule import Example, Rule

_BACKUP = frozenset({"keras.callbacks.BackupAndRestore", "keras.callbacks.experimental.BackupAndRestore"})
_CHECKPOINT = "keras.callbacks.ModelCheckpoint"
_RESTORES = frozenset({"restore", "load_weights", "latest_checkpoint", "restore_or_initialize", "load_model"})

MESSAGE = (
    "multi-worker fit has no BackupAndRestore callback: if one worker fails, training starts "
    "over; keras.callbacks.BackupAndRestore(backup_dir=...) resumes it from the last epoch"
)
NO_FOLDER = "add keras.callbacks.BackupAndRestore(backup_dir=<a folder every worker can reach>) to fit's callbacks"


class BackupAndRestore(Rule):
    CODE = "TFD009"
    NAME = "backup-and-restore"
    DESCRIPTION = "Multi-worker fit without BackupAndRestore: a failed worker restarts training (suggestion)"
    SAFE = False
    EXAMPLES = (
        Example(
            before=(
                "import os\n"
                "import tf_keras as keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3, callbacks=[keras.callbacks.ModelCheckpoint(os.path.join(OUT, \"ckpt\"))])\n"
            ),
            after=(
                "import os\n"
                "import tf_keras as keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3, callbacks=[keras.callbacks.ModelCheckpoint(os.path.join(OUT, \"ckpt\")), "
                'keras.callbacks.BackupAndRestore(backup_dir=os.path.join(OUT, "backup"))])\n'
            ),
        ),
        Example(
            before=(
                "import tf_keras as keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                'model.fit(dataset, epochs=3, callbacks=[keras.callbacks.BackupAndRestore("/shared/backup")])\n'
            ),
        ),
    )

    def applies(self) -> bool:
        return bool(MultiWorker.of(self.program).strategies)

    def check(self) -> None:
        workers = MultiWorker.of(self.program)
        if not workers.keras.keras2 or self._resumes():
            return
        training = TrainingModel.of(self.program)
        for site in training.sites:
            call = site.call
            if site.kind != "fit" or not isinstance(call.func, cst.Attribute) or call.func.attr.value not in ("fit", "fit_generator"):
                continue
            if argument(call, "initial_epoch") is not None:
                continue
            models = [m for m in training.makers(call.func.value) if training.is_model_maker(m)]
            classes = workers.scope_classes(call).union(*(workers.scope_classes(m) for m in models))
            if not classes or not classes <= MULTI_WORKER:
                continue
            self.fix(call, MESSAGE, lambda edits, c=call: self._plan(edits, c))

    def _resumes(self) -> bool:
        """Whether the file already backs up or restores training state."""
        for call, _owner in self.facts.calls:
            if self.facts.names_of(call.func) & _BACKUP:
                return True
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
            if name in _RESTORES:
                return True
        return False

    def _plan(self, edits, call: cst.Call) -> None:
        callbacks = argument_value(call, "callbacks")
        if not isinstance(callbacks, cst.List):
            raise NotFound(NO_FOLDER)
        os_name = module_alias(self.program, "os")
        for element in callbacks.elements:
            value = element.value
            if not (isinstance(value, cst.Call) and _CHECKPOINT in self.facts.names_of(value.func)):
                continue
            path = argument_value(value, "filepath", 0)
            if not (isinstance(path, cst.Call) and os_name and "os.path.join" in {n for n in self.facts.names_of(path.func)} and path.args):
                continue
            folder = path.args[0].value
            if not isinstance(folder, (cst.Name, cst.SimpleString, cst.Attribute)):
                continue
            spelling = self.program.module.code_for_node(value.func).rpartition(".")[0]
            if not spelling:
                continue
            code = f'{spelling}.BackupAndRestore(backup_dir={os_name}.path.join({self.program.module.code_for_node(folder)}, "backup"))'
            new = cst.Element(cst.parse_expression(code))

            def add(node: cst.List, new: cst.Element = new) -> cst.List:
                elements = list(node.elements)
                last = elements[-1]
                if isinstance(last.comma, cst.Comma):
                    # One element per line with a trailing comma: the new one gets a line too.
                    previous = elements[-2].comma if len(elements) > 1 else None
                    between = previous.whitespace_after if isinstance(previous, cst.Comma) else cst.SimpleWhitespace(" ")
                    elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
                    elements.append(new.with_changes(comma=last.comma))
                else:
                    elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    elements.append(new)
                return node.with_changes(elements=elements)

            edits.replace(callbacks, add)
            return
        raise NotFound(NO_FOLDER)
