"""Vector add as the TLX agent's host example is written: a Triton kernel for GPUs and a torch path
on the host, so on a CPU the kernel's `tl.store` never runs."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if not x.is_cuda:
        return x + y
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, y, out, x.numel(), BLOCK=BLOCK_SIZE)
    return out
