"""Hypothesis: launch on a dedicated stream so the copy engine and the kernel overlap."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


_stream = None


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    global _stream
    out = torch.empty_like(x)
    n = x.numel()
    if x.is_cuda:
        _stream = _stream or torch.cuda.Stream()
        with torch.cuda.stream(_stream):
            add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    else:
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
