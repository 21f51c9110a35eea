"""An in-place kernel by contract (scales its argument): legitimate when the user's kernel is."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * alpha, mask=mask)


def scale_(x: torch.Tensor, alpha: float) -> torch.Tensor:
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](x, n, alpha, BLOCK=1024)
    return x
