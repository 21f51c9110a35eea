"""Style: a helper computes the block and warps from the row length, clamped to a fused maximum,
and the kernel walks the row in blocks (the `BLOCK_SIZE, num_warps = calculate_settings(n)` of
Unsloth-like libraries with the `min(MAX_FUSED_SIZE, next_power_of_2(n))` clamp of Liger-like
cross entropy). Cases of different widths compute different settings: one knob per value."""

import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 1024


def calculate_settings(n):
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(n))
    num_warps = 4
    if BLOCK_SIZE >= 1024:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit
def _rms_norm_looped_forward(
    Y, Y_row_stride, X, X_row_stride, W, n_cols, eps, BLOCK_SIZE: tl.constexpr
):
    row_idx = tl.program_id(0)
    X += row_idx * X_row_stride
    Y += row_idx * Y_row_stride
    sum_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        col_offsets = start + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X + col_offsets, mask=col_offsets < n_cols, other=0).to(tl.float32)
        sum_sq += X_block * X_block
    inv_rms = tl.math.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        col_offsets = start + tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        X_block = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
        W_block = tl.load(W + col_offsets, mask=mask, other=0)
        tl.store(Y + col_offsets, X_block * inv_rms * W_block, mask=mask)


def rmsnorm(X: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    _rms_norm_looped_forward[(n_rows,)](
        Y,
        Y.stride(0),
        X,
        X.stride(0),
        W,
        n_cols,
        eps,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    return Y
