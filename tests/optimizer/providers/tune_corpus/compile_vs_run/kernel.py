"""Style: two kernels in one file where the one that compiles slowest is not the one that runs
longest: a row-statistics kernel (one pass over a whole row, a slow first launch) and a
normalization that walks each row in narrow blocks (a long run). The first launch of a kernel
pays its JIT compile, so the first verification's times point at the statistics kernel; the
second verification's point at the normalization."""

import time

import torch
import triton
import triton.language as tl

STATS_BLOCK = 128
APPLY_BLOCK = 16
COMPILE_SECONDS = 0.3  # the first launch's compile of the statistics kernel, as on a GPU


@triton.jit
def _row_stats_kernel(X, S, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(S + row, tl.sum(x * x, axis=0))


@triton.jit
def _normalize_kernel(X, W, S, Y, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    rstd = tl.rsqrt(tl.load(S + row) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
        tl.store(Y + row * stride + cols, x * rstd * tl.load(W + cols, mask=mask), mask=mask)


_compiled: list[bool] = []


def _compile_once(*args, **kwargs):
    """The interpreter compiles nothing: this pre-run hook (Triton runs it inside the launch)
    stands in for the JIT compile a GPU pays on the kernel's first launch in a process."""
    if not _compiled:
        _compiled.append(True)
        time.sleep(COMPILE_SECONDS)


_row_stats_kernel.add_pre_run_hook(_compile_once)


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    s = torch.empty(n_rows, dtype=torch.float32)
    y = torch.empty_like(x)
    _row_stats_kernel[(n_rows,)](x, s, x.stride(0), n_cols, BLOCK=STATS_BLOCK)
    _normalize_kernel[(n_rows,)](x, w, s, y, x.stride(0), n_cols, 1e-6, BLOCK=APPLY_BLOCK)
    return y
