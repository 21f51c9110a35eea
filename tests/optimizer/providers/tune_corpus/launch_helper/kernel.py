"""Style: the kernel is launched from a helper function; the block is the literal its caller
passes (as Liger-like code splits forward wrappers from launch helpers)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) * 2.0, mask=mask)


def _launch(x, y, BLOCK):
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)


def scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _launch(x, y, BLOCK=32)
    return y
