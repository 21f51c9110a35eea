"""A Triton vector add, run by the GPU profiling tests in-process (Proton) and as a script (ncu)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

N = 1 << 24  # fp32: 64 MiB per tensor, larger than the H200's L2
BLOCK = 1024


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.rand(N, device="cuda")
    y = torch.rand(N, device="cuda")
    return x, y, torch.empty_like(x)


def launch(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    add_kernel[(triton.cdiv(N, BLOCK),)](x, y, out, N, BLOCK=BLOCK)


BYTES_MOVED = 3 * N * 4  # two reads, one write


if __name__ == "__main__":
    x, y, out = inputs()
    for _ in range(3):
        launch(x, y, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
