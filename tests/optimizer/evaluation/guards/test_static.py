"""Static checks: each construct a cheating candidate needs is found with its own reason, and
legitimate Triton kernels (the examples, public-style kernels) pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from optimizer.evaluation.guards.static import check_source

REPO = Path(__file__).resolve().parents[4]
KERNELS = sorted((Path(__file__).parent / "kernels").glob("*.py"))
EXAMPLES = sorted((REPO / "examples").rglob("kernel.py"))

PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"


def guards(src: str, trusted: str | None = None) -> list[str]:
    return [f.guard for f in check_source(PRELUDE + textwrap.dedent(src), trusted)]


@pytest.mark.parametrize("path", EXAMPLES + KERNELS, ids=lambda p: str(p.relative_to(REPO)))
def test_legitimate_triton_kernels_pass(path):
    findings = check_source(path.read_text())
    if path.name == "inplace_scale.py":  # in-place by contract: flagged unless the user's kernel is
        assert [f.guard for f in findings] == ["static:input-mutation"]
        assert check_source(path.read_text(), trusted_source=path.read_text()) == []
    else:
        assert findings == [], findings


def test_the_examples_are_checked():
    assert EXAMPLES, "examples/*/kernel.py should exist"


@pytest.mark.parametrize(
    "src, guard, words",
    [
        ("import threading\n", "static:thread", "threading"),
        ("from concurrent.futures import ThreadPoolExecutor\n", "static:thread", "concurrent"),
        ("import multiprocessing as mp\n", "static:thread", "multiprocessing"),
        ("import os\nos.fork()\n", "static:thread", "os.fork"),
        ("s = torch.cuda.Stream()\n", "static:side-stream", "torch.cuda.Stream"),
        ("with torch.cuda.stream(s):\n    pass\n", "static:side-stream", "torch.cuda.stream"),
        (
            "import time\ntime.perf_counter = lambda: 0.0\n",
            "static:timer-patch",
            "time.perf_counter",
        ),
        (
            "from time import perf_counter\nimport time as t\nt.time = perf_counter\n",
            "static:timer-patch",
            "time.time",
        ),
        ("triton.testing.do_bench = lambda *a, **k: 1.0\n", "static:timer-patch", "do_bench"),
        (
            "setattr(torch.cuda.Event, 'elapsed_time', lambda *a: 0.1)\n",
            "static:timer-patch",
            "elapsed_time",
        ),
        ("torch.allclose = lambda *a, **k: True\n", "static:patching", "torch.allclose"),
        ("torch.testing.assert_close = lambda *a, **k: None\n", "static:patching", "assert_close"),
        ("torch.backends.cuda.matmul.allow_tf32 = True\n", "static:patching", "allow_tf32"),
        ("from unittest import mock\n", "static:patching", "unittest.mock"),
        ("import sys\nsys.modules['harness'] = None\n", "static:introspection", "sys.modules"),
        ("import cProfile\n", "static:profiler", "cProfile"),
        ("import sys\nsys.setprofile(None)\n", "static:introspection", "sys.setprofile"),
        ("import gc\n", "static:introspection", "gc"),
        ("import inspect\n", "static:introspection", "inspect"),
        ("import sys\nf = sys._getframe(1)\n", "static:introspection", "_getframe"),
        ("def f(g):\n    return g.__globals__\n", "static:introspection", "__globals__"),
        ("data = open('/tmp/x').read()\n", "static:file-io", "open()"),
        ("import os\nos.remove('x')\n", "static:file-io", "os.remove"),
        ("from pathlib import Path\nPath('x').write_text('y')\n", "static:file-io", "write_text"),
        ("torch.save({}, 'x.pt')\n", "static:file-io", "torch.save"),
        ("import socket\n", "static:network", "socket"),
        ("import urllib.request\n", "static:network", "urllib"),
        ("exec('x = 1')\n", "static:dynamic-code", "exec"),
        ("import importlib\n", "static:dynamic-code", "importlib"),
        ("import harness\n", "static:bundle-read", "harness"),
        ("REF = 'reference_kernel.py'\n", "static:bundle-read", "reference_kernel"),
        ("CASES = '../cases.json'\n", "static:bundle-read", "cases.json"),
        ("from . import helpers\n", "static:bundle-read", "relative import"),
    ],
)
def test_each_construct_is_found_with_its_reason(src, guard, words):
    findings = check_source(PRELUDE + src)
    assert guard in [f.guard for f in findings], findings
    assert any(words in f.detail for f in findings if f.guard == guard), findings


def test_in_place_updates_of_an_argument_are_found():
    assert guards("def add(x, y):\n    y.add_(x)\n    return y\n") == ["static:input-mutation"]
    assert guards("def f(x):\n    x[0] = 1\n    return x\n") == ["static:input-mutation"]
    assert guards("def f(x, y):\n    x += y\n    return x\n") == ["static:input-mutation"]
    assert guards("def f(x, y):\n    return torch.add(x, y, out=x)\n") == ["static:input-mutation"]


def test_writing_into_an_output_argument_is_not_input_mutation():
    assert guards("def f(x, out):\n    out.copy_(x)\n    return out\n") == []
    assert guards("def f(x, out):\n    return torch.add(x, x, out=out)\n") == []


KERNEL = """
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p = out_ptr + offs
    tl.store(p, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
"""


def test_a_launch_that_binds_an_input_to_the_written_pointer_is_found():
    src = (
        KERNEL
        + "def add(x, y):\n    add_kernel[(1,)](x, y, y, x.numel(), BLOCK=1024)\n    return y\n"
    )
    findings = check_source(PRELUDE + src)
    assert [f.guard for f in findings] == ["static:input-mutation"]
    assert "passes its argument 'y' as out_ptr" in findings[0].detail
    view = (
        KERNEL
        + "def add(x, y):\n    y2 = y.view(-1)\n    add_kernel[(1,)](x, y, out_ptr=y2, n=1, BLOCK=4)\n    return y\n"
    )
    assert guards(view) == ["static:input-mutation"]
    fine = (
        KERNEL
        + "def add(x, y):\n    o = torch.empty_like(x)\n    add_kernel[(1,)](x, y, o, 1, BLOCK=4)\n    return o\n"
    )
    assert guards(fine) == []


def test_caching_by_tensor_address_is_found():
    src = """
    _cache = {}
    def f(x):
        key = (x.data_ptr(), x.shape)
        if key in _cache:
            return _cache[key]
        out = x * 2
        _cache[key] = out
        return out
    """
    found = check_source(PRELUDE + textwrap.dedent(src))
    assert {f.guard for f in found} == {"static:output-cache"}
    assert "data_ptr" in found[0].detail


def test_an_output_kept_in_module_state_and_returned_is_found():
    src = """
    _out = {}
    def f(x):
        k = (x.shape, x.dtype)
        if k not in _out:
            buf = torch.empty_like(x)
            _out[k] = buf
        return _out[k]
    """
    found = check_source(PRELUDE + textwrap.dedent(src))
    assert [f.guard for f in found] == ["static:output-cache"]
    assert "f() keeps its output tensor in module-level _out" in found[0].detail


def test_a_compiled_kernel_cache_is_not_an_output_cache():
    src = """
    _kernels = {}
    def get(dtype):
        if dtype not in _kernels:
            _kernels[dtype] = triton.Config({"BLOCK": 128})
        return _kernels[dtype]
    """
    assert guards(src) == []


def test_one_finding_per_reason_in_source_order():
    src = "import threading\nimport threading\nimport socket\n"
    found = check_source(src)
    assert [f.guard for f in found] == ["static:thread", "static:network"]
    assert [f.line for f in found] == [1, 3]


def test_a_source_that_does_not_parse_has_no_findings():
    assert check_source("def broken(:\n") == []


def test_string_methods_that_share_a_name_with_file_methods_are_not_file_io():
    assert guards("def f(s):\n    return s.replace('a', 'b').split()\n") == []


def test_importing_tlxdb_itself_is_introspection():
    found = check_source("from optimizer.evaluation.guards import snapshot\n")
    assert [f.guard for f in found] == ["static:introspection"]
    assert "tlxdb's own optimizer" in found[0].detail
