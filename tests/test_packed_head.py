"""The output head's packed CPU product (inference/loading.py), on the real model.

Same logits as the plain product to float32 rounding, the same greedy tokens as
`model.generate()` through the engine, the plain product wherever packing does not apply
(gradients, other dtypes, a GPU), a deep copy (the quantization lesson's) that works and packs
its own, and the profiler still counting the head as a matrix product."""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.profiler import profile

from inference.loading import PackedHead, pack_output_head
from inference.profile_step import MATMUL_OPS


def plain(head: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return nn.functional.linear(x, head.weight, head.bias)


def test_the_loaded_model_uses_it_on_a_float32_cpu_and_keeps_its_tied_weight(lm):
    head = lm.model.lm_head
    cpu32 = torch.device(lm.device).type == "cpu" and head.weight.dtype == torch.float32
    assert isinstance(head, nn.Linear)
    assert isinstance(head, PackedHead) == (cpu32 and torch.backends.mkldnn.is_available())
    emb = lm.model.get_input_embeddings().weight
    assert head.weight.data_ptr() == emb.data_ptr()  # still tied: one copy of the parameter
    assert not pack_output_head(lm.model)  # once is enough: already packed (or not packable)


def test_logits_equal_the_plain_product_to_rounding(lm):
    head = lm.model.lm_head
    x = torch.randn(2, 7, head.in_features, dtype=head.weight.dtype, device=lm.device)
    with torch.inference_mode():
        got, want = head(x), plain(head, x)
    assert got.shape == (2, 7, head.out_features)
    tol = 1e-4 if head.weight.dtype == torch.float32 else 5e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_greedy_tokens_equal_generate(lm, chat_ids):
    from inference.generation import stream

    n = 16
    x = torch.tensor([chat_ids], device=lm.device)
    with torch.inference_mode():
        ref = lm.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
    assert [e.token_id for e in stream(lm, chat_ids, None, n)] == ref[0, len(chat_ids):].tolist()


def test_plain_where_packing_does_not_apply():
    head = nn.Linear(16, 40, bias=False)
    holder = nn.Module()
    holder.lm_head = head
    assert pack_output_head(holder) == torch.backends.mkldnn.is_available()
    x = torch.randn(3, 16, requires_grad=True)
    y = head(x)  # gradients on: the plain product, differentiable
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    with torch.inference_mode():
        half = head.to(torch.bfloat16)
        xb = torch.randn(3, 16, dtype=torch.bfloat16)
        assert torch.equal(half(xb), plain(half, xb))  # bfloat16: the plain product


def test_a_deep_copy_works_and_packs_its_own():
    holder = nn.Module()
    holder.lm_head = nn.Linear(16, 40, bias=False)
    pack_output_head(holder)
    x = torch.randn(4, 16)
    with torch.inference_mode():
        before = holder.lm_head(x)
    twin = copy.deepcopy(holder)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2)
    with torch.inference_mode():
        assert torch.allclose(twin.lm_head(x), 2 * before, atol=1e-5)
        assert torch.equal(holder.lm_head(x), before)  # the original keeps its packing
        inside = copy.deepcopy(holder)  # made in inference mode: the plain product
        assert torch.equal(inside.lm_head(x), plain(inside.lm_head, x))
    with torch.no_grad():
        holder.lm_head.weight.add_(1)  # a changed weight is packed again
    with torch.inference_mode():
        torch.testing.assert_close(holder.lm_head(x), plain(holder.lm_head, x))


def test_the_profiler_counts_the_head_as_a_matrix_product():
    holder = nn.Module()
    holder.lm_head = nn.Linear(16, 40, bias=False)
    pack_output_head(holder)
    with torch.inference_mode(), profile() as prof:
        holder.lm_head(torch.randn(2, 16))
    names = {e.key for e in prof.key_averages()}
    assert names & MATMUL_OPS, names
