"""Cascade attention (a shared prefix read once per group) against the gathered reference
(every row's blocks gathered, one masked softmax) on hand-made pools, and on the real model:
rows after a long shared preamble get exactly their solo greedy tokens with it on."""


import pytest
import torch

from inference.cascade_attention import CascadePlan, partial_attention
from inference.config import Settings
from inference.generation import stream
from inference.paged_cache import PagedKV, PagedStep
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.tokens import prompt_ids

BT, D = 4, 8
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def pool(heads_kv: int, dtype: torch.dtype, blocks: int = 24) -> PagedKV:
    kv = PagedKV.allocate(1, heads_kv, D, blocks, BT, dtype, torch.device("cpu"))
    torch.manual_seed(0)
    for t in kv.keys + kv.values:
        t.copy_(torch.randn(t.shape))
    return kv


def batch(tables: list[list[int]], positions: list[list[int]], kv: PagedKV):
    """Tables padded with the scratch block, positions left-padded with -1."""
    width, q = max(map(len, tables)), max(map(len, positions))
    t = torch.tensor([r + [kv.scratch_block] * (width - len(r)) for r in tables])  # [B, NB]
    p = torch.tensor([[-1] * (q - len(r)) + r for r in positions])  # [B, Q]
    return t, p


def gathered(kv: PagedKV, query: torch.Tensor, positions, tables) -> torch.Tensor:
    """The reference: each row's blocks gathered, one masked softmax in float32."""
    step = PagedStep(kv, positions, tables)
    n, bt, h_kv, d = kv.keys[0].shape
    b, h = query.shape[:2]
    k, v = (pool.view(n, -1).index_select(0, step.read_blocks).view(b, -1, h_kv, d)
            .transpose(1, 2).float().repeat_interleave(h // h_kv, 1)  # [B, H, S, D]
            for pool in (kv.keys[0], kv.values[0]))
    s = query.float() @ k.transpose(-1, -2) * d ** -0.5  # [B, H, Q, S]
    return torch.softmax(s.masked_fill(~step.mask, float("-inf")), -1) @ v  # [B, H, Q, D]


def both(tables, positions, heads=(6, 2), dtype=torch.float32):
    kv = pool(heads[1], dtype)
    t, p = batch(tables, positions, kv)
    q = torch.randn(len(tables), heads[0], p.shape[1], D).to(dtype)  # [B, H, Q, D]
    plan = CascadePlan.build(kv, p, t)
    got = plan.attend(q, 0, D ** -0.5)
    real = (p >= 0)[:, None, :, None]  # padding queries' outputs are never used
    want = gathered(kv, q, p, t)
    return plan, torch.where(real, got, 0), torch.where(real, want, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [(6, 2), (3, 3)])  # GQA (3 query heads a key head), MHA
def test_cascade_equals_the_gathered_reference(dtype, heads):
    tables = [[0, 1, 2, 3], [0, 1, 2, 4, 5],  # share 3 blocks
              [0, 6, 7], [0, 8],  # share 1 block (with the two above as well)
              [9, 10], [11]]  # share nothing: groups of one
    positions = [[13], [17], [10], [5], [6], [2]]  # partly filled last blocks
    plan, got, want = both(tables, positions, heads, dtype)
    assert torch.allclose(got, want, atol=TOL[dtype], rtol=TOL[dtype])
    assert [(m.tolist(), b.tolist()) for m, b in plan.groups] == [([0, 1], [0, 1, 2]),
                                                                 ([2, 3], [0])]


def test_groups_of_one_row_take_the_plain_path():
    plan, got, want = both([[0, 1], [2, 3], [4]], [[6], [7], [1]])
    assert plan.groups == []
    assert torch.allclose(got, want, atol=1e-5)


def test_a_long_shared_prefix_is_read_once_not_once_per_row():
    prefix = list(range(10))
    tables = [prefix + [10 + r] for r in range(4)]
    plan, got, want = both(tables, [[41], [42], [40], [43]])
    assert torch.allclose(got, want, atol=1e-5)
    ((members, blocks),) = plan.groups
    assert members.tolist() == [0, 1, 2, 3] and blocks.tolist() == prefix  # once for four
    assert plan.own_blocks.numel() == 4  # each row's own last block, not its 11
    assert (plan.read_positions, plan.gathered_positions) == ((10 + 4) * BT, 4 * 11 * BT)


def test_chunked_prefill_rows_keep_their_causal_mask():
    """Rows of several new positions (left-padded) beside a decode row: the prefix stops
    before the block of a row's first query, so the mask inside its own blocks still holds."""
    tables = [[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 5]]
    positions = [[9, 10, 11, 12, 13], [14], [8, 9, 10]]  # row 0 begins inside block 2
    plan, got, want = both(tables, positions)
    assert torch.allclose(got, want, atol=1e-5)
    assert [(m.tolist(), b.tolist()) for m, b in plan.groups] == [([0, 1, 2], [0, 1])]


def test_a_query_that_sees_no_key_gives_no_weight():
    q, k = torch.ones(1, 1, 1, D), torch.ones(1, 1, 2, D)
    o, lse = partial_attention(q, k, k, torch.zeros(1, 1, 1, 2, dtype=torch.bool), 1.0)
    assert lse.item() == float("-inf") and not o.isnan().any()


def test_rows_after_a_long_shared_preamble_get_their_solo_tokens(lm, monkeypatch):
    from bench.paged import long_text

    tok = lm.tokenizer
    preamble = "Read this handout, then answer. " + long_text(tok, 200)
    asks = ["What is the document's number?", "Summarise it in five words.",
            "Name one thing it mentions.", "Is it a story?"]
    ids = [prompt_ids(tok, preamble + "\n\nQuestion: " + a) for a in asks]
    groups: list[int] = []
    build = CascadePlan.build

    def spy(kv, positions, tables):
        plan = build(kv, positions, tables)
        if 2 * plan.read_positions <= plan.gathered_positions:  # the batch takes it
            groups.append(max((len(b) for _, b in plan.groups), default=0))
        return plan
    monkeypatch.setattr(CascadePlan, "build", staticmethod(spy))
    srv = Server(lm, Settings(server_rows=8, cascade_attention=True))
    off = Server(lm, Settings(server_rows=8, cascade_attention=False))
    off.close()
    assert srv.batch.cascade and not off.batch.cascade  # the server follows its Settings
    try:
        with srv.turns.exclusive():
            reqs = [srv.submit(i, SamplingSettings(), 12) for i in ids]
        got = [[e.token_id for e in r.events()] for r in reqs]
    finally:
        srv.close()
    assert max(groups, default=0) * Settings().block_tokens >= 192  # the preamble, once a step
    for i, tokens in zip(ids, got):
        assert tokens == [e.token_id for e in stream(lm, i, SamplingSettings(), 12)]


def test_a_model_running_another_attention_keeps_the_gathered_path():
    """A lesson measuring "eager" at that moment: the batch must not pass a plan it ignores."""
    from types import SimpleNamespace

    from inference.cascade_attention import use_cascade

    assert not use_cascade(SimpleNamespace(config=SimpleNamespace(_attn_implementation="eager")))
