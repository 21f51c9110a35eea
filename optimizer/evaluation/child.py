"""The harness child process: `python -m optimizer.evaluation.child REQUEST_FD REPLY_FD`.

It executes one command at a time for the parent (`optimizer.evaluation.session.Session`): commands arrive
as JSON lines on REQUEST_FD, each answered by exactly one JSON line on REPLY_FD. The harness and
the candidate may print to stdout/stderr freely; replies never travel there.

Commands (`op`): load, build, verify, benchmark, profile, attribute, ncu_range, warm, exit. Every reply carries `ok` and, after
load, `patched`: the watched functions the candidate replaced since the snapshot (see
optimizer.evaluation.guards.snapshot). The child never decides anything: it calls the harness, normalizes what
came back into JSON, and reports exceptions as text (the tail of the traceback). It refuses one
result the contract cannot allow: a `build` whose artifact is one the harness already returned
for another source in this child (a kernel imported under a fixed module name), since the
candidate and its references would be one kernel measured against itself.

`attribute` runs one extra `benchmark(artifact, case, 1)` (or one `verify`) under Proton and
returns which kernels ran, how often and for how long; where Proton cannot run (the Triton
interpreter, no GPU) it says why and returns no numbers. A `benchmark` with `machine` samples
NVML while the harness call runs (profilers/nvml.py) and replies with the call's machine state
(`machine`: MachineSampled's fields), where NVML can be read. `ncu_range` is for a child started under
`ncu --profile-from-start off`: it opens ncu's profiling range around exactly one launch of the
main kernel, after `skip` launches of it (warm-up), within up to `calls` harness calls
(`verify`, or `benchmark(artifact, case, 1)`). `warm` creates the CUDA context ahead of need.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import math
import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from optimizer.evaluation import interpreter
from optimizer.evaluation.guards.snapshot import Snapshot, bundle_modules
from optimizer.evaluation.launches import observing
from tlxstore.config import settings
from tlxstore.events import KernelLaunch
from tlxstore.limits import MAX_SAMPLES_PER_CASE

HARNESS_MODULE = "harness"
INLINE_LIMIT_BYTES = 1_000_000  # a profile result larger than this travels as a file
REQUIRED = ("build", "verify", "benchmark")
SAME_ARTIFACT = (
    "build() returned the same artifact for two different sources: does it import the kernel "
    "under a fixed module name? give each build its own module name"
)


class _Failure(Exception):
    """A harness result the contract does not allow (turned into an error reply)."""


def _tb() -> str:
    return traceback.format_exc()


def _number(value: Any) -> float | None:
    """A JSON-safe float for a metric (None when not a finite real number)."""
    try:
        if isinstance(value, bool):
            return float(value)
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _truthy(value: Any) -> bool:
    """bool, numpy.bool_ and one-element tensors count as a verdict."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ in ("bool_", "bool", "Tensor") and hasattr(value, "item"):
        item = value.item()
        if isinstance(item, bool):
            return item
    raise _Failure(f"verify returned {type(value).__name__}, expected bool or a dict with 'passed'")


def _jsonable(value: Any) -> Any:
    """Harness results as plain JSON (numbers made floats, unknown objects made strings)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    num = _number(value)
    return num if num is not None else str(value)


def _same(a: Any, b: Any) -> bool:
    """`a` and `b` are one object, or containers of the same kind whose items all are."""
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return bool(a) and a.keys() == b.keys() and all(a[k] is b[k] for k in a)
    if isinstance(a, list | tuple) and type(a) is type(b):
        return bool(a) and len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    return False


def _declared_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f > 0 else None


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").lower() in ("1", "true", "on", "yes")


def machine_source() -> Any:
    """The NVML source of this child (profilers.nvml.Nvml): a recorded trace where
    TLXDB_NVML_TRACE names one, else the GPU torch measures on; NvmlUnavailable says why not."""
    from profilers import nvml

    trace = settings().nvml_trace
    if trace is not None:
        return nvml.RecordedNvml.load(trace)
    if _interpreted():
        raise nvml.NvmlUnavailable(
            "NVML is unavailable on this target: the Triton interpreter runs kernels on the CPU"
        )
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        raise nvml.NvmlUnavailable(
            "NVML is unavailable on this target: no GPU is visible to the harness child"
        )
    if getattr(torch.version, "hip", None):
        raise nvml.NvmlUnavailable("NVML is unavailable on this target: NVML reads NVIDIA GPUs")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    bus, dev = getattr(props, "pci_bus_id", None), getattr(props, "pci_device_id", None)
    domain = getattr(props, "pci_domain_id", 0) or 0
    uuid = getattr(props, "uuid", None)
    return nvml.open_device(
        nvml.Selector(
            pci_bus_id=f"{domain:04x}:{bus:02x}:{dev:02x}.0"
            if bus is not None and dev is not None
            else None,
            uuid=str(uuid) if uuid is not None else None,
            index=nvml.Selector.from_environment(os.environ).index,
        )
    )


def proton_unavailable() -> str | None:
    """Why Proton cannot profile in this process (None: it can try)."""
    if _interpreted():
        return (
            "Proton is unavailable on this target: the Triton interpreter runs kernels on the CPU"
        )
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return "Proton is unavailable on this target: no GPU is visible to the harness child"
    return None


class _LaunchWindow:
    """ncu's profiling range (cudaProfilerStart/Stop) around one launch of one Triton kernel.

    Triton calls the launch hooks around every launch it makes; the window opens before launch
    number `skip` (0-based) of `kernel` and closes right after it, so a child started under
    `ncu --profile-from-start off` profiles exactly that launch.
    """

    def __init__(self, kernel: str, skip: int) -> None:
        try:
            import torch
            from triton import knobs
        except ImportError as e:
            raise _Failure(f"ncu range needs torch and triton: {e}") from None
        self.torch = torch
        self.cuda = torch.cuda.is_available()
        self.runtime = knobs.runtime
        self.kernel, self.skip = kernel, skip
        self.seen = 0
        self.open = False
        self.profiled = False
        self._saved: tuple[Any, Any] | None = None

    @staticmethod
    def _name(metadata: Any) -> str | None:
        data = metadata if isinstance(metadata, dict) else getattr(metadata, "get", lambda: None)()
        return data.get("name") if isinstance(data, dict) else None

    def enter(self, metadata: Any) -> None:
        if self.profiled or self._name(metadata) != self.kernel:
            return
        if self.seen == self.skip:
            if self.cuda:
                self.torch.cuda.synchronize()
                self.torch.cuda.profiler.start()
            self.open = True
        self.seen += 1

    def exit(self, metadata: Any) -> None:
        if self.open:
            if self.cuda:
                self.torch.cuda.profiler.stop()
            self.open, self.profiled = False, True

    def __enter__(self) -> _LaunchWindow:
        enter_chain, exit_chain = self.runtime.launch_enter_hook, self.runtime.launch_exit_hook
        if hasattr(enter_chain, "add"):  # triton >= 3.5: chains of hooks
            enter_chain.add(self.enter)
            exit_chain.add(self.exit)
        else:
            self._saved = (enter_chain, exit_chain)
            self.runtime.launch_enter_hook = self.enter
            self.runtime.launch_exit_hook = self.exit
        return self

    def __exit__(self, *exc: object) -> None:
        if self.open:
            self.exit(None)
        if self._saved is not None:
            self.runtime.launch_enter_hook, self.runtime.launch_exit_hook = self._saved
        else:
            self.runtime.launch_enter_hook.remove(self.enter)
            self.runtime.launch_exit_hook.remove(self.exit)


def _inline(result: dict[str, Any], request: Any) -> dict[str, Any]:
    """A profile result as it travels: over INLINE_LIMIT_BYTES of JSON, the whole result is
    written to `raw_profile.json` under the request's artifacts_dir and a reference travels
    instead (as the TLX agent does)."""
    text = json.dumps(result, allow_nan=False)
    size = len(text.encode())
    if size <= INLINE_LIMIT_BYTES:
        return result
    folder = request.get("artifacts_dir") if isinstance(request, dict) else None
    if not folder or not os.path.isabs(folder):
        return {
            "error": f"the profile's {size} bytes exceed the inline limit of 1 MB "
            "and no artifacts_dir was given",
            "size_bytes": size,
        }
    path = Path(folder) / "raw_profile.json"
    path.write_text(text + "\n", encoding="utf-8")
    return {
        "artifact": str(path),
        "size_bytes": size,
        "truncated": True,
        "diagnostics": f"the profile's {size} bytes were written to {path}",
    }


class Child:
    def __init__(self) -> None:
        self.harness: Any = None
        self.snapshot: Snapshot | None = None
        self.artifacts: dict[str, Any] = {}
        self.sources: dict[str, str] = {}  # key -> the source its artifact was built from
        self.bundle_root: Path | None = None
        self.changed: Callable[[], list[str]] | None = None
        self.sampler: Any = None  # profilers.nvml.DeviceSampler, once NVML was opened
        self.no_machine: str | None = None  # why NVML cannot be read here, once tried

    def _sampler(self) -> Any:
        """This child's NVML sampler (None where NVML cannot be read: tried once)."""
        if self.sampler is None and self.no_machine is None:
            from profilers import nvml

            try:
                self.sampler = nvml.DeviceSampler(machine_source())
            except nvml.NvmlUnavailable as e:
                self.no_machine = str(e)
        return self.sampler

    # ---- commands ------------------------------------------------------------------------
    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        root = Path(msg["bundle_root"])
        self.bundle_root = root
        if _interpreted():  # do_bench and autotune lists timed on the CPU clock
            interpreter.install()
        sys.path.insert(0, str(root))
        path = root / msg.get("harness_file", "harness.py")
        spec = importlib.util.spec_from_file_location(HARNESS_MODULE, path)
        if spec is None or spec.loader is None:
            return {"ok": False, "error": f"cannot load {path}"}
        module = importlib.util.module_from_spec(spec)
        sys.modules[HARNESS_MODULE] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            return {"ok": False, "error": f"importing {path.name} raised", "traceback": _tb()}
        missing = [f for f in REQUIRED if not callable(getattr(module, f, None))]
        if missing:
            return {"ok": False, "error": f"{path.name} lacks {', '.join(missing)}"}
        self.harness = module
        self._import_rng_modules()
        own = [sys.modules[__name__], sys.modules[Snapshot.__module__]]
        self.snapshot = Snapshot.take([*bundle_modules(root), *own])
        # The bound method keeps the original function even if the class attribute is replaced.
        self.changed = self.snapshot.changed
        profile = getattr(module, "profile", None)
        profile_args = None
        if callable(profile):
            try:
                params = inspect.signature(profile).parameters.values()
                positional = [
                    p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
                varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
                profile_args = 3 if varargs or len(positional) >= 3 else 2
            except (TypeError, ValueError):
                profile_args = 3
        return {"ok": True, "profile_args": profile_args, "watched": len(self.snapshot.entries)}

    @staticmethod
    def _import_rng_modules() -> None:
        # Seeding must reach the RNGs the harness will use, even if it imports them lazily.
        for name in ("numpy", "torch"):
            if name not in sys.modules and importlib.util.find_spec(name) is not None:
                with contextlib.suppress(Exception):
                    importlib.import_module(name)

    def build(self, msg: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            result = self.harness.build(msg["source"], msg["target"])
        except BaseException:
            return {
                "ok": True,
                "success": False,
                "duration_ms": (time.perf_counter() - t0) * 1e3,
                "diagnostics": _tb(),
            }
        duration_ms = (time.perf_counter() - t0) * 1e3
        success, artifact, diagnostics = True, result, ""
        if isinstance(result, dict) and "success" in result:
            success = bool(result["success"])
            artifact = result.get("artifact", result)
            diagnostics = str(result.get("diagnostics", "") or "")
        if success:
            if self._built_before(msg["source"], artifact):
                return {"ok": False, "error": SAME_ARTIFACT}
            self.artifacts[msg["key"]] = artifact
            self.sources[msg["key"]] = msg["source"]
        return {
            "ok": True,
            "success": success,
            "duration_ms": duration_ms,
            "diagnostics": diagnostics,
        }

    def _built_before(self, source: str, artifact: Any) -> bool:
        """Whether `artifact` is one this child's harness already returned for another source.

        A build that writes the source to a file and imports it under a fixed module name
        (`import ln_kernel`) gets Python's cached module back from the second build on: the
        candidate and the reference built after it in one child were then one module, measured
        against itself (a user's 2.7x faster layer norm read 0.994x and was rejected). A fresh
        build makes fresh objects, so the test is identity: the artifact itself, or every item of
        a tuple, list or dict artifact (one that shares only some items, torch or a config, is
        another artifact). The same source built again may return the same one (a cache)."""
        return any(
            _same(artifact, self.artifacts[key])
            for key, built in self.sources.items()
            if built != source
        )

    @staticmethod
    def seed_everything(seed: int) -> None:
        random.seed(seed)
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed(seed % (2**32))
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.manual_seed(seed)

    def verify(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The harness's verdict; with `observe`, also every kernel launch it made
        (optimizer.evaluation.launches)."""
        launches: list[KernelLaunch] = []
        reply = self._verify(msg, launches)
        if launches:
            reply["launches"] = [launch.model_dump(mode="json") for launch in launches]
        return reply

    def _verify(self, msg: dict[str, Any], launches: list[KernelLaunch]) -> dict[str, Any]:
        self.seed_everything(int(msg["seed"]))
        try:
            if msg.get("observe"):
                with observing() as seen:
                    result = self.harness.verify(self.artifacts[msg["key"]], msg["case"])
                launches.extend(seen)
            else:
                result = self.harness.verify(self.artifacts[msg["key"]], msg["case"])
            if isinstance(result, dict):
                if "passed" not in result:
                    raise _Failure("verify returned a dict without 'passed'")
                passed = (
                    _truthy(result["passed"])
                    if not isinstance(result["passed"], int)
                    else bool(result["passed"])
                )
                diagnostics = str(result.get("diagnostics", "") or "")
                raw = result.get("metrics") or {}
                metrics = (
                    {str(k): _number(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
                )
            else:
                passed, diagnostics, metrics = _truthy(result), "", {}
        except _Failure as e:
            return {"ok": True, "passed": False, "diagnostics": str(e), "metrics": {}}
        except BaseException:
            return {"ok": True, "passed": False, "diagnostics": _tb(), "metrics": {}}
        return {"ok": True, "passed": passed, "diagnostics": diagnostics, "metrics": metrics}

    def benchmark(self, msg: dict[str, Any]) -> dict[str, Any]:
        case = msg["case"]
        sampler = self._sampler() if msg.get("machine") else None
        machine: dict[str, Any] | None = None
        try:
            with sampler.sampling() if sampler is not None else contextlib.nullcontext() as m:
                machine = m
                result = self.harness.benchmark(
                    self.artifacts[msg["key"]], case, int(msg["repetitions"])
                )
        except BaseException:
            return {"ok": False, "error": "benchmark raised", "traceback": _tb()}
        warmup = cache_policy = None
        declared: dict[str, Any] = dict(case.get("parameters") or {})
        if isinstance(result, dict):
            if "samples_us" not in result:
                return {"ok": False, "error": "benchmark returned a dict without 'samples_us'"}
            raw = result["samples_us"]
            warmup = _declared_int(result.get("warmup_count"))
            if result.get("warmup_count") == 0:
                warmup = 0
            cache_policy = (
                None if result.get("cache_policy") is None else str(result["cache_policy"])
            )
            declared.update({k: result[k] for k in ("bytes_moved", "flops") if k in result})
        else:
            raw = result
        if not isinstance(raw, list | tuple) or isinstance(raw, str):
            try:
                raw = list(raw)
            except TypeError:
                return {
                    "ok": False,
                    "error": f"benchmark returned {type(raw).__name__}, expected a list of samples (us)",
                }
        if not raw:
            return {"ok": False, "error": "benchmark returned no samples"}
        # the first max(repetitions, MAX_SAMPLES_PER_CASE) samples; a harness returning millions
        # would otherwise fill the log and the bootstrap's memory (the live log says so)
        raw = raw[: max(int(msg["repetitions"]), MAX_SAMPLES_PER_CASE)]
        samples = []
        for i, s in enumerate(raw):
            f = None if isinstance(s, bool) else _number(s)
            if f is None:
                return {
                    "ok": False,
                    "error": f"benchmark sample {i} is {s!r}, not a finite number of microseconds",
                }
            if f <= 0:
                return {
                    "ok": False,
                    "error": f"benchmark sample {i} is {f!r} us; samples must be positive",
                }
            samples.append(f)
        return {
            "ok": True,
            "samples_us": samples,
            "warmup_count": warmup,
            "cache_policy": cache_policy,
            "bytes_moved": _declared_int(declared.get("bytes_moved")),
            "flops": _declared_int(declared.get("flops")),
            "machine": machine,
        }

    def profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        fn = getattr(self.harness, "profile", None)
        if not callable(fn):
            return {"ok": False, "error": "the harness has no profile()"}
        artifact = self.artifacts[msg["key"]]
        try:
            if msg.get("profile_args") == 2:
                result = fn(artifact, msg["case"])
            else:
                result = fn(artifact, msg["case"], msg.get("request"))
        except BaseException:
            return {"ok": False, "error": "profile raised", "traceback": _tb()}
        if not isinstance(result, Mapping):
            return {
                "ok": False,
                "error": f"profile returned {type(result).__name__}, expected a dict",
            }
        return {"ok": True, "result": _inline(_jsonable(dict(result)), msg.get("request"))}

    def _call_harness(self, msg: dict[str, Any]) -> Callable[[], object]:
        artifact, case = self.artifacts[msg["key"]], msg["case"]
        if msg.get("mode") == "verify":
            return lambda: self.harness.verify(artifact, case)
        return lambda: self.harness.benchmark(artifact, case, 1)

    def attribute(self, msg: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        reason = proton_unavailable()
        if reason is not None:
            return {"ok": True, "available": False, "reason": reason}
        from profilers import proton

        run = self._call_harness(msg)
        try:
            result = proton.collect(run, msg["artifacts_dir"])
        except BaseException:
            return {"ok": False, "error": "the harness raised under Proton", "traceback": _tb()}
        section = result["proton"]
        if section.get("kernel_time_us") is None and not section.get("kernels"):
            diagnostics = "; ".join(str(d) for d in section.get("diagnostics", []))
            return {"ok": True, "available": False, "reason": diagnostics or "no kernel seen"}
        return {
            "ok": True,
            "available": True,
            "result": _jsonable(section),
            "wall_ms": (time.perf_counter() - t0) * 1e3,
        }

    def warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Create the CUDA context now (a prestarted child does it before it is needed)."""
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
        return {"ok": True}

    def ncu_range(self, msg: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            window = _LaunchWindow(str(msg["kernel"]), int(msg.get("skip", 1)))
        except _Failure as e:
            return {"ok": True, "profiled": False, "reason": str(e)}
        run = self._call_harness(msg)
        try:
            with window:
                for _ in range(int(msg.get("calls", 1))):
                    if window.profiled:
                        break
                    run()
                torch = sys.modules.get("torch")
                if torch is not None and torch.cuda.is_available():
                    torch.cuda.synchronize()
        except BaseException:
            return {"ok": False, "error": "the harness raised under ncu", "traceback": _tb()}
        return {
            "ok": True,
            "profiled": window.profiled,
            "launches_seen": window.seen,
            "reason": ""
            if window.profiled
            else f"{msg['kernel']} launched {window.seen} time(s), fewer than skip + 1",
            "wall_ms": (time.perf_counter() - t0) * 1e3,
        }

    # ---- loop ----------------------------------------------------------------------------
    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        handler = {
            "load": self.load,
            "build": self.build,
            "verify": self.verify,
            "benchmark": self.benchmark,
            "profile": self.profile,
            "attribute": self.attribute,
            "ncu_range": self.ncu_range,
            "warm": self.warm,
        }.get(str(op))
        if handler is None:
            return {"ok": False, "error": f"unknown op {op!r}"}
        if op != "load" and self.harness is None:
            return {"ok": False, "error": "harness not loaded"}
        reply = handler(msg)
        if self.changed is not None:
            reply["patched"] = self.changed()
        return reply


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # Two inherited descriptors, or two FIFO paths (a child started under ncu, which may not
    # hand descriptors through to the program it launches).
    if args[0].isdigit():
        requests = os.fdopen(int(args[0]), "r", encoding="utf-8")
        replies = os.fdopen(int(args[1]), "w", encoding="utf-8", buffering=1)
    else:
        requests = open(args[0], encoding="utf-8")  # noqa: SIM115
        replies = open(args[1], "w", encoding="utf-8", buffering=1)  # noqa: SIM115
    child = Child()
    for line in requests:
        msg = json.loads(line)
        if msg.get("op") == "exit":
            break
        try:
            reply = child.handle(msg)
        except BaseException:
            reply = {"ok": False, "error": "the harness child failed", "traceback": _tb()}
        try:
            line = json.dumps(reply, allow_nan=False)
        except (TypeError, ValueError) as e:
            line = json.dumps({"ok": False, "error": f"the harness result cannot be recorded: {e}"})
        replies.write(line + "\n")
        replies.flush()
    replies.close()
    return 0


if __name__ == "__main__":
    rc = main()
    # Exit without running interpreter teardown (atexit hooks a candidate may have registered).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
