"""N replicas on any machine, and a ``MirroredStrategy()`` that uses them (child side).

The devices are: the machine's GPUs when there are at least N; else the first GPU split into
N logical GPUs; else the CPU split into N logical CPUs. Only ``set_logical_device_configuration``
runs before the script, which does not start TensorFlow's runtime, so the script's own
``tf.config`` calls still work. The device list is read when the first strategy is created.

A ``MirroredStrategy()`` without devices gets these; on logical devices it also gets
``ReductionToOneDevice`` (NCCL needs distinct GPUs). TensorFlow's default there, a collective
all-reduce, is what a machine of GPUs runs, and it fails where ``ReductionToOneDevice`` does not:
a step function that makes variables on its first call which TensorFlow cannot initialize
outside it (see ``loops._unlifted``); the strategy is marked so that such a step is still failed.
A strategy given explicit devices is left as the script wrote it.
"""

from __future__ import annotations

import functools
import os

import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import mirrored_strategy

from autofix.smoke.state import describe_exception, recorder

# Logical GPUs need a memory limit; this is per replica.
GPU_MEMORY_MB = int(os.environ.get("AUTOFIX_SMOKE_GPU_MEMORY_MB", "1024"))


class Provision:
    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        plural = "s" if replicas != 1 else ""
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) >= replicas:
            self.kind, self.logical, self.how = "GPU", False, f"{replicas} GPU{plural}"
        elif gpus:
            config = [tf.config.LogicalDeviceConfiguration(memory_limit=GPU_MEMORY_MB)] * replicas
            tf.config.set_logical_device_configuration(gpus[0], config)
            self.kind, self.logical, self.how = "GPU", True, f"1 GPU split into {replicas} logical GPUs"
        else:
            cpus = tf.config.list_physical_devices("CPU")
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * replicas)
            self.kind, self.logical, self.how = "CPU", True, f"{replicas} logical CPU{plural}"

    def devices(self) -> list[str]:
        """The devices of the script running now: a job may ask for fewer replicas than the
        process provides (``--compare`` runs a script on 1 replica and on N in one process)."""
        count = min(self.replicas, recorder.replicas or self.replicas)
        return [d.name for d in tf.config.list_logical_devices(self.kind)][:count]


def install(provision: Provision) -> None:
    _patch_strategy(provision)
    for name in ("set_memory_growth", "set_visible_devices", "set_logical_device_configuration", "set_virtual_device_configuration"):
        for namespace in (tf.config, tf.config.experimental):
            original = getattr(namespace, name, None)
            if original is not None and not getattr(original, "_autofix_smoke", False):
                setattr(namespace, name, _tolerant(original, f"tf.config.{name}"))


def _patch_strategy(provision: Provision) -> None:
    cls = mirrored_strategy.MirroredStrategy
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, devices=None, cross_device_ops=None):
        replaced = False
        if devices is None:
            devices = provision.devices()
            if provision.logical and not isinstance(cross_device_ops, tf.distribute.ReductionToOneDevice):
                if cross_device_ops is not None:
                    recorder.note(
                        f"the script's {type(cross_device_ops).__name__} was replaced by ReductionToOneDevice, "
                        f"which works on {provision.how}"
                    )
                # Measured only for the collective all-reduce (TensorFlow's default).
                replaced = cross_device_ops is None or isinstance(cross_device_ops, cross_device_ops_lib.CollectiveAllReduce)
                cross_device_ops = tf.distribute.ReductionToOneDevice()
        original(self, devices=devices, cross_device_ops=cross_device_ops)
        # The script runs TensorFlow's default (collective) all-reduce on GPUs.
        self._autofix_collective_replaced = replaced
        recorder.strategies.append(f"{type(self).__name__} ({self.num_replicas_in_sync} replicas)")

    cls.__init__ = __init__


def _tolerant(original, name: str):
    """The script's device setup may come after an earlier script of the same batch (or the
    bootstrap) has fixed the devices; that must not fail the script."""

    @functools.wraps(original)
    def call(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except (RuntimeError, ValueError) as exc:
            recorder.note(f"the script's {name}() call was ignored ({describe_exception(exc)})")
            return None

    call._autofix_smoke = True
    return call
