"""Style: the block and warps are default arguments of the Python wrapper (as Liger-like
wrappers expose them)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_fwd(X, W, Y, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0)
        sq += x * x
    rstd = tl.rsqrt(tl.sum(sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
        tl.store(Y + row * stride + cols, x * rstd * tl.load(W + cols, mask=mask), mask=mask)


def rmsnorm(x, w, eps=1e-6, BLOCK_SIZE=32, num_warps=4):
    y = torch.empty_like(x)
    _rmsnorm_fwd[(x.shape[0],)](
        x, w, y, x.stride(0), x.shape[1], eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps
    )
    return y
