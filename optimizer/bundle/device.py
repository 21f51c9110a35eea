"""The device a bundle's target names, and the one the run measures on: `detect_device` asks a
child process with the target's environment (a CPU target needs none), `check_arch` compares
--arch or target.json's architecture with it (aliases: H100, hopper, sm_90 name one device),
`probe` runs any such child. Used before validation (optimizer/run/validation.py) and by
`tlxdb bundle new` (scaffold.py)."""

from __future__ import annotations

import json
import platform
import re
import subprocess
from collections.abc import Mapping
from typing import Any

from tlxstore.errors import ConfigError
from tlxstore.events import DeviceInfo


class ArchMismatchError(ConfigError):
    """--arch does not match the device."""


_CUDA_PROBE = (
    "import json, torch\n"
    "p = torch.cuda.get_device_properties(0)\n"
    "print(json.dumps({'name': p.name, 'major': p.major, 'minor': p.minor,"
    " 'sms': p.multi_processor_count, 'l2': getattr(p, 'L2_cache_size', None),"
    " 'arch': getattr(p, 'gcnArchName', None)}))\n"
)


class ProbeError(Exception):
    """A probe child failed; the message is the last line it wrote, or what went wrong."""


def probe(python: str, code: str, env: Mapping[str, str]) -> Any:
    """The JSON the last line of `python -c code` prints, run in a child with `env`."""
    try:
        out = subprocess.run(
            [python, "-c", code],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        last = detail.strip().splitlines()[-1] if detail.strip() else type(e).__name__
        raise ProbeError(last) from None


def detect_device(
    backend: str, environment: dict[str, str], python: str, env: dict[str, str]
) -> DeviceInfo:
    """The device the harness will run on. CPU targets are identified without a child; GPU
    targets are asked in a child process with the target's environment."""
    if backend == "cpu":
        interpreted = environment.get("TRITON_INTERPRET", "") == "1"
        return DeviceInfo(
            kind="cpu-interpreter" if interpreted else "cpu",
            backend="cpu",
            architecture=platform.machine(),
        )
    try:
        info = probe(python, _CUDA_PROBE, {**env, **environment})
    except ProbeError as e:
        raise ConfigError(f"no {backend} device found for target.json's backend: {e}") from None
    arch = (
        info["arch"]
        if backend == "hip" and info.get("arch")
        else f"sm_{info['major']}{info['minor']}"
    )
    return DeviceInfo(
        kind=info["name"],
        backend=backend,  # type: ignore[arg-type]
        architecture=arch,
        num_sms=info.get("sms"),
        l2_bytes=info.get("l2"),
    )


# Architecture names the TLX agent accepts in target.json or --arch, by what they mean on the device:
# an NVIDIA compute-capability major, or an AMD gfx name. Spelled in any case, "-"/" " as "_".
_CUDA_MAJOR_ALIASES: dict[str, int] = {
    **dict.fromkeys(("volta", "v100", "sm70", "sm_70"), 7),
    **dict.fromkeys(("ampere", "a100", "a10", "a10g", "ada", "l4", "l40", "l40s", "rtx4090"), 8),
    **dict.fromkeys(("sm80", "sm_80", "sm86", "sm_86", "sm89", "sm_89"), 8),
    **dict.fromkeys(("hopper", "h100", "h200", "h800", "gh200", "sm90", "sm_90", "sm90a"), 9),
    **dict.fromkeys(("sm_90a",), 9),
    **dict.fromkeys(("blackwell", "b200", "b200a", "b300", "gb200", "gb300"), 10),
    **dict.fromkeys(("sm100", "sm_100", "sm100a", "sm_100a", "sm103", "sm_103"), 10),
    **dict.fromkeys(("rtx5090", "sm120", "sm_120"), 12),
}
_GFX_ALIASES: dict[str, str] = {
    **dict.fromkeys(("mi200", "mi210", "mi250", "mi250x", "cdna2"), "gfx90a"),
    **dict.fromkeys(("mi300", "mi300x", "mi300a", "mi325", "mi325x", "cdna3"), "gfx942"),
    **dict.fromkeys(("mi350", "mi350x", "mi355", "mi355x", "cdna4"), "gfx950"),
}
_FAMILIES = {  # what a user calls the parts of an expected architecture, for the mismatch line
    "sm_8x": "Ampere or Ada: A100, A10, L4, L40",
    "sm_9x": "Hopper: H100, H200, GH200",
    "sm_10x": "Blackwell: B200, GB200",
}
_SM = re.compile(r"^(?:sm_?)?(\d{2,3})[a-z]?$")
_GFX = re.compile(r"gfx[0-9a-f]+")


def _normalized(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def expected_architecture(name: str, backend: str) -> str | None:
    """What an architecture name requires of the device: "sm_9x" (a CUDA major) or "gfx942";
    None when the name says nothing checkable (a host CPU, a name tlxdb does not know)."""
    n = _normalized(name)
    if backend == "cuda":
        major = _CUDA_MAJOR_ALIASES.get(n)
        m = _SM.match(n)
        if major is None and m:
            major = int(m.group(1)[:-1])
        return f"sm_{major}x" if major is not None else None
    if backend == "hip":
        found = _GFX.search(n)
        return found.group(0) if found else _GFX_ALIASES.get(n)
    return None


def _satisfies(expected: str, device: DeviceInfo) -> bool:
    have = (device.architecture or "").lower()
    if expected.startswith("sm_"):
        m = re.match(r"^sm_(\d+)(\d)[a-z]?$", have)
        return m is not None and f"sm_{m.group(1)}x" == expected
    found = _GFX.search(have)
    return found is not None and found.group(0) == expected


def check_arch(arch: str | None, device: DeviceInfo, target_architecture: str = "") -> None:
    """Raise ArchMismatchError when --arch (else target.json's architecture) names another
    architecture than the device's. Aliases (H100, hopper, sm90, sm_90 ...) mean the same device;
    a target.json name tlxdb cannot check (a host CPU's "x86_64", "host") is not checked."""
    name = arch or target_architecture
    if not name:
        return
    where = f"--arch {arch}" if arch else f"target.json architecture {name}"
    have = device.architecture or "of unknown architecture"
    if device.backend == "cpu":
        if arch is None or _normalized(arch) in {_normalized(have), "host", "cpu"}:
            return
        wanted = expected_architecture(arch, "cuda") or expected_architecture(arch, "hip") or arch
        raise ArchMismatchError(
            f"{where} expects {wanted}, but the device ({device.kind}) is {have}"
        )
    expected = expected_architecture(name, device.backend)
    if expected is None:
        if arch is None:
            return
        raise ArchMismatchError(
            f"--arch {arch} is not an architecture tlxdb knows for {device.backend} "
            "(e.g. sm_90, hopper, H100, sm_100, blackwell, gfx942, mi300x)"
        )
    if not _satisfies(expected, device):
        if arch is None:  # a bundle written for another GPU: say which, and how to get one
            family = _FAMILIES.get(expected)
            raise ArchMismatchError(
                f"{where} expects {expected}{f' ({family})' if family else ''}, but the device "
                f"({device.kind}) is {have}; `tlxdb bundle new` writes a bundle for this device"
            )
        raise ArchMismatchError(
            f"{where} expects {expected}, but the device ({device.kind}) is {have}"
        )
