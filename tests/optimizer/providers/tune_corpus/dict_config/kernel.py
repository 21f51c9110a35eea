"""Style: launch settings kept in a dict and splatted into the launch (as xformers-like code
does with its kernel configs)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(X, Y, n, alpha, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) * alpha, mask=mask)


def scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    config = {"BLOCK_SIZE": 32, "num_warps": 4}
    _scale_kernel[(triton.cdiv(n, config["BLOCK_SIZE"]),)](x, y, n, 2.0, **config)
    return y
