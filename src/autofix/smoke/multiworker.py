"""What a worker of a multi-worker run records besides a plain run (child side).

- ``MultiWorkerMirroredStrategy()`` on a worker split into R logical CPUs uses all R of them
  (TensorFlow's own choice is one CPU per worker), so a run has workers x R replicas;
- a digest of the weights after each ``fit`` and after each custom-loop step, to compare the
  workers;
- how each dataset given to the strategy is split over the workers: its auto-shard policy and
  whether the pipeline calls ``shard()``;
- the known Keras 3 failure of ``fit`` / ``evaluate`` under MultiWorkerMirroredStrategy,
  named as such.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import tensorflow as tf

from autofix.smoke.state import recorder

KERAS3_LIMITATION = (
    "Keras 3 cannot train or evaluate under MultiWorkerMirroredStrategy, a known limitation "
    "(keras-team/keras#20585, tensorflow/tensorflow#72388): use tf_keras with TF_USE_LEGACY_KERAS=1, "
    "or a custom training loop"
)
MULTI_WORKER_STRATEGIES = ("CollectiveAllReduceStrategy", "MultiWorkerMirroredStrategy", "_CollectiveAllReduceStrategyExperimental")


def install(provision: Any) -> None:
    from tensorflow.python.distribute import collective_all_reduce_strategy as module

    extended = module.CollectiveAllReduceExtended
    original_devices = extended._initialize_local_devices

    @functools.wraps(original_devices)
    def local_devices(self, cluster_resolver, worker_device):
        if provision.logical and provision.kind == "CPU" and provision.replicas > 1:
            names = tuple(f"{worker_device}/device:CPU:{i}" for i in range(provision.replicas))
            return names, "CPU"
        return original_devices(self, cluster_resolver, worker_device)

    extended._initialize_local_devices = local_devices
    strategy = module.CollectiveAllReduceStrategy
    original_init = strategy.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        workers = getattr(self.extended, "_num_workers", 1)
        recorder.strategies.append(f"MultiWorkerMirroredStrategy ({self.num_replicas_in_sync} replicas, {workers} worker{'s' if workers != 1 else ''})")
        if workers == 1:
            recorder.note("MultiWorkerMirroredStrategy ran as a single worker: --workers 2 runs it across worker processes")

    strategy.__init__ = __init__


def is_multi_worker(strategy: Any) -> bool:
    return type(strategy).__name__ in MULTI_WORKER_STRATEGIES


def digest(variables: list[Any] | None) -> str | None:
    """A short digest of the variables' values (in order), or None when there are none."""
    if not variables:
        return None
    sha = hashlib.sha256()
    try:
        for variable in variables:
            value = variable.numpy() if hasattr(variable, "numpy") else tf.convert_to_tensor(variable).numpy()
            sha.update(value.tobytes())
    except Exception:
        return None
    return sha.hexdigest()[:16]


def sharding(dataset: Any) -> tuple[str | None, bool | None]:
    """(auto-shard policy name, whether the pipeline has a shard()) of a tf.data dataset."""
    if not isinstance(dataset, tf.data.Dataset):
        return None, None
    try:
        policy = dataset.options().experimental_distribute.auto_shard_policy
        policy_name = getattr(policy, "name", str(policy))
    except Exception:
        policy_name = None
    try:
        graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
        ops = {node.op for node in graph.node}
        for function in graph.library.function:
            ops.update(node.op for node in function.node_def)
        sharded = "ShardDataset" in ops
    except Exception:
        sharded = None
    return policy_name, sharded


def keras3_limitation(module_name: str, strategy: Any, error: BaseException) -> str | None:
    """The known cause, when Keras 3 fails under MultiWorkerMirroredStrategy with it."""
    if module_name != "keras" or not is_multi_worker(strategy):
        return None
    text = str(error)
    if "PerReplica" in text and "unsupported type" in text:
        return KERAS3_LIMITATION
    return None
