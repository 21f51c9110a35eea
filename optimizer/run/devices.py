"""The devices of a parallel run (`--devices all|0,1,3`): which exist, and how a child is pinned.

Invariants:
- A device id is an index among the devices tlxdb's own environment (with target.environment)
  shows; the child measuring on it gets CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES on ROCm) set to
  that device alone (the matching entry when the variable already narrows the list).
- Every device of a run is of one kind (a run compares measurements of one kind of device).
- A CPU target has one device and nothing to pin, unless TLXDB_SIMULATED_DEVICES=N makes up N
  ids for testing the parallel loop; such a run is recorded as simulated (DevicesAssigned and
  every DeviceEvaluated), and its children get TLXDB_SIMULATED_DEVICE=<id> instead of a pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from optimizer.bundle.device import ProbeError, probe
from optimizer.evaluation.evaluator import Evaluator
from tlxstore.config import settings
from tlxstore.errors import ConfigError
from tlxstore.events import DevicesAssigned

PIN_VARIABLES = {"cuda": "CUDA_VISIBLE_DEVICES", "hip": "HIP_VISIBLE_DEVICES"}
SIMULATED_VARIABLE = "TLXDB_SIMULATED_DEVICE"  # what a simulated device's child gets

_NAMES_PROBE = (
    "import json, torch\n"
    "print(json.dumps([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]))\n"
)


class DevicesError(ConfigError):
    """--devices names devices this machine does not have."""


def _parse(spec: str, available: list[str]) -> list[str]:
    text = spec.strip()
    if text == "all":
        return list(available)
    ids = [part.strip() for part in text.split(",")]
    if not text or any(not i.isdigit() for i in ids):
        raise DevicesError(f"--devices {spec!r}: give 'all' or device indexes such as 0,1,3")
    if len(set(ids)) != len(ids):
        raise DevicesError(f"--devices {spec!r} names a device twice")
    missing = [i for i in ids if i not in available]
    if missing:
        have = ", ".join(available) if available else "none"
        raise DevicesError(f"--devices {spec!r}: no device {missing[0]} here (devices: {have})")
    return ids


def gpu_names(python: str, env: Mapping[str, str]) -> list[str]:
    """The names of the GPUs a child with `env` sees, in index order."""
    try:
        names = probe(python, _NAMES_PROBE, env)
    except ProbeError as e:
        raise DevicesError(f"cannot list the GPUs for --devices: {e}") from None
    return [str(n) for n in names]


def assign(
    spec: str, backend: str, python: str, env: Mapping[str, str], target_env: Mapping[str, str]
) -> DevicesAssigned:
    """The devices `--devices spec` names for a target of `backend`; DevicesError if any is
    missing, ConfigError if they are of different kinds."""
    simulated = settings().simulated_devices if backend == "cpu" else None
    if simulated is not None:
        ids = _parse(spec, [str(i) for i in range(simulated)])
        return DevicesAssigned(devices=ids, pin_variable=None, simulated=True)
    if backend == "cpu":  # one device, nothing to pin
        return DevicesAssigned(devices=_parse(spec, ["0"]), pin_variable=None)
    child_env = {**env, **target_env}
    names = gpu_names(python, child_env)
    ids = _parse(spec, [str(i) for i in range(len(names))])
    kinds = sorted({names[int(i)] for i in ids})
    if len(kinds) > 1:
        raise ConfigError(
            f"--devices {spec}: the devices are of different kinds ({', '.join(kinds)}); "
            "a run compares measurements of one kind, name devices of one kind"
        )
    return DevicesAssigned(devices=ids, pin_variable=PIN_VARIABLES[backend])


def pin(assigned: DevicesAssigned, device: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables a harness child measuring on `device` gets on top of `env` (tlxdb's
    environment with target.environment)."""
    if assigned.simulated:
        return {SIMULATED_VARIABLE: device}
    var = assigned.pin_variable
    if var is None:
        return {}
    visible = [v.strip() for v in env.get(var, "").split(",") if v.strip()]
    return {var: visible[int(device)] if int(device) < len(visible) else device}


@dataclass
class DevicePool:
    """A parallel run's devices and, for each, the evaluator whose children are pinned to it."""

    assigned: DevicesAssigned
    evaluators: dict[str, Evaluator]

    @classmethod
    def pinned(
        cls, assigned: DevicesAssigned, evaluator: Evaluator, env: Mapping[str, str]
    ) -> DevicePool:
        """One pinned copy of `evaluator` per device; `env`: tlxdb's environment with
        target.environment (what a pin narrows)."""
        return cls(assigned, {d: evaluator.pinned(pin(assigned, d, env)) for d in assigned.devices})

    @property
    def own(self) -> Evaluator:
        """The run's own device: validation, revalidation and the commit's re-verification."""
        return self.evaluators[self.assigned.devices[0]]

    def evaluator(self, device: str) -> Evaluator:
        return self.evaluators[device]
