"""Style: a helper picks the block and warps by problem size, in branches of literals (no one
literal tune could rewrite: the values are computed, seen at the observed launches), and the
grid divides the problem by the variable the launch passes: `BLOCK_SIZE, nw = get_config(n)`
... `kernel[(triton.cdiv(n, BLOCK_SIZE),)](..., BLOCK_SIZE=BLOCK_SIZE)`. A rewrite of the
block must reach the grid too."""

import torch
import triton
import triton.language as tl


def get_config(n):
    """(BLOCK_SIZE, num_warps) by problem size."""
    if n <= 4096:
        return 128, 4
    return 256, 8


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK_SIZE, nw = get_config(n)
    _add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=nw)
    return out
