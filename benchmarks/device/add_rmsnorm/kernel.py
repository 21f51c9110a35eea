"""Fused residual add + RMSNorm, as in a transformer block: h = x + residual, then
y = h / sqrt(mean(h^2) + eps) * weight over the last dimension; returns (y, h), both in x's dtype.

One program per row, two passes over the row in blocks of BLOCK columns: the first adds, stores h
and sums its squares; the second adds again (from x and residual: no read of h written by other
threads of the program) and writes y. The launch knobs are module constants, untuned. Not one of
the repository's examples: benchmarks/device/h200_bundle_new.sh gives it to `tlxdb bundle new`
with ref.py as the reference, then to `tlxdb optimize`.
"""

import torch
import triton
import triton.language as tl

BLOCK = 256
NUM_WARPS = 1


@triton.jit
def add_rmsnorm_kernel(
    x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64) * row_stride
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + row + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + cols, ((x + r) * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """(RMSNorm(x + residual) * weight, x + residual) of 2-D row-major x and residual."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    h = torch.empty_like(x)
    add_rmsnorm_kernel[(n_rows,)](
        x, residual, weight, y, h, n_cols, x.stride(0), eps, BLOCK=BLOCK, num_warps=NUM_WARPS
    )
    return y, h
