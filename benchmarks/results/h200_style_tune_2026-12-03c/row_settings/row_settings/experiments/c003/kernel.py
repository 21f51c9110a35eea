"""Style: the block and warps are computed at run time from the row length by a helper (the
`BLOCK_SIZE, num_warps = calculate_settings(n)` pattern of Unsloth-like libraries). Only a
launch observed at run time says what they are."""

import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 65536


def calculate_settings(n):
    BLOCK_SIZE = triton.next_power_of_2(n)
    if BLOCK_SIZE > MAX_FUSED_SIZE:
        raise RuntimeError(f"a row of {n} does not fit one block")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit
def _rms_layernorm_forward(
    Y, Y_row_stride, X, X_row_stride, W, n_cols, eps, BLOCK_SIZE: tl.constexpr
):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X + row_idx * X_row_stride + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0)
    row_var = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_var = tl.math.rsqrt(row_var + eps)
    tl.store(Y + row_idx * Y_row_stride + col_offsets, (X_row * inv_var) * W_row, mask=mask)


def rmsnorm(X: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    _rms_layernorm_forward[(n_rows,)](
        Y,
        Y.stride(0),
        X,
        X.stride(0),
        W,
        n_cols,
        eps,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps={4: 8}.get(num_warps, num_warps),
    )
    return Y
