"""Style: a module-level constant feeds the launch; the kernel walks each row in a loop of
BLOCK columns (two passes: sum of squares, then scale)."""

import torch
import triton
import triton.language as tl

BLOCK = 32


@triton.jit
def _rms_loop_kernel(X, W, Y, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask)
        tl.store(Y + cols, x * rstd * w, mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _rms_loop_kernel[(x.shape[0],)](x, w, y, x.stride(0), x.shape[1], 1e-6, BLOCK=BLOCK)
    return y
