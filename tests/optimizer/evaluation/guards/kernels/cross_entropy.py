"""Cross-entropy loss forward with a persistent row loop and a block-pointer store."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def ce_fwd_kernel(logits_ptr, labels_ptr, loss_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    for row in range(start, n_rows, step):
        row_ptr = logits_ptr + row * stride
        cols = tl.arange(0, BLOCK)
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        acc = tl.zeros([BLOCK], tl.float32)
        for off in range(0, n_cols, BLOCK):
            x = tl.load(row_ptr + off + cols, mask=off + cols < n_cols, other=-float("inf")).to(
                tl.float32
            )
            new_m = tl.maximum(m, x)
            acc = acc * tl.exp(m - new_m) + tl.exp(x - new_m)
            m = new_m
        mx = tl.max(m, 0)
        lse = mx + tl.log(tl.sum(acc * tl.exp(m - mx), 0))
        label = tl.load(labels_ptr + row)
        picked = tl.load(row_ptr + label).to(tl.float32)
        out = tl.make_block_ptr(
            loss_ptr, shape=(n_rows,), strides=(1,), offsets=(row,), block_shape=(1,), order=(0,)
        )
        tl.store(out, tl.reshape(lse - picked, (1,)))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    block = min(4096, 1 << math.ceil(math.log2(n_cols)))
    ce_fwd_kernel[(min(n_rows, 1024),)](
        logits, labels, loss, n_rows, n_cols, logits.stride(0), BLOCK=block
    )
    return loss.mean()
