"""Speculative decoding's pure parts on hand-made data: the acceptance rule, prompt lookup,
the verdict. The rule must leave the output distributed exactly as the model's own p."""
import pytest
import torch

from inference.experiments.speculative_race import FASTER, NOISE, SLOWER, run_noise, speed_verdict
from inference.speculative import accept_greedy, accept_sampled, lookup, residual

P = torch.tensor([0.5, 0.3, 0.15, 0.05])  # the model's distribution at one position
Q = torch.tensor([0.1, 0.6, 0.1, 0.2])  # a draft that likes token 1 too much
DRAWS = 20_000
TOL = 0.015  # ~4 standard errors of a share estimated from 20,000 draws


def test_speculative_greedy_keeps_the_agreeing_prefix():
    assert accept_greedy([5, 7, 9], [5, 7]) == (2, 9)  # all kept, the bonus token after
    assert accept_greedy([5, 7, 9], [5, 8]) == (1, 7)  # the first mismatch replaced
    assert accept_greedy([4, 7, 9], [5, 7]) == (0, 4)  # a later match does not count
    assert accept_greedy([3], []) == (0, 3)  # no guesses: a plain decode step


def test_speculative_residual_is_the_normalised_leftover():
    r = residual(P, Q, guess=1)
    assert torch.allclose(r, torch.tensor([0.4, 0.0, 0.05, 0.0]) / 0.45)
    one_hot = residual(P, None, guess=0)
    assert torch.allclose(one_hot, torch.tensor([0.0, 0.3, 0.15, 0.05]) / 0.5)
    assert torch.equal(residual(Q, Q, guess=1), Q)  # nothing left over: p itself


def _first_token_shares(draw_token) -> torch.Tensor:
    counts = torch.zeros(4)
    for _ in range(DRAWS):
        counts[draw_token()] += 1
    return counts / DRAWS


def test_speculative_sampling_gives_the_models_distribution_with_a_draft_model():
    g = torch.Generator().manual_seed(0)
    p_rows, q_rows = torch.stack([P, P]), Q[None]  # [k + 1, V], [k, V] with k = 1

    def token():
        guess = int(torch.multinomial(Q, 1, generator=g))  # the draft samples from q
        kept, model_token = accept_sampled(p_rows, [guess], q_rows, g)
        return guess if kept else model_token

    shares = _first_token_shares(token)
    assert torch.allclose(shares, P, atol=TOL), shares
    assert abs(shares[1] - Q[1]) > 0.2  # the draft's bias did not leak through


def test_speculative_sampling_gives_the_models_distribution_with_a_fixed_guess():
    g = torch.Generator().manual_seed(1)
    p_rows = torch.stack([P, P])

    def token():
        kept, model_token = accept_sampled(p_rows, [2], None, g)  # prompt lookup: one-hot q
        return 2 if kept else model_token

    shares = _first_token_shares(token)
    assert torch.allclose(shares, P, atol=TOL), shares


def test_speculative_sampling_acceptance_rate_is_the_overlap():
    """A guess drawn from q is kept with probability sum_x min(p(x), q(x)) (0.55 here)."""
    g = torch.Generator().manual_seed(2)
    p_rows, q_rows = torch.stack([P, P]), Q[None]
    kept = sum(accept_sampled(p_rows, [int(torch.multinomial(Q, 1, generator=g))], q_rows, g)[0]
               for _ in range(DRAWS))
    assert kept / DRAWS == pytest.approx(float(torch.minimum(P, Q).sum()), abs=TOL)


def test_speculative_sampling_is_reproducible_with_a_seed():
    p_rows = torch.softmax(torch.randn(5, 50, generator=torch.Generator().manual_seed(3)), -1)
    runs = [[accept_sampled(p_rows, [1, 2, 3, 4], None, torch.Generator().manual_seed(9))
             for _ in range(1)] for _ in range(2)]
    assert runs[0] == runs[1]


def test_speculative_prompt_lookup_proposes_what_followed():
    assert lookup([1, 2, 3, 9, 1, 2], k=2) == [3, 9]
    assert lookup([1, 2, 3, 9, 1, 2], k=8) == [3, 9, 1, 2]  # runs to the end of the text
    assert lookup([7, 1, 2, 5, 3, 1, 2], k=1, max_ngram=2) == [5]  # the longest match wins
    assert lookup([4, 1, 5, 1], k=3) == [5, 1]  # falls back to one token
    assert lookup([1, 2, 3, 4], k=3) == []  # nothing repeats: no guess
    assert lookup([1, 2, 1, 2], k=0) == []


def test_speculative_verdict_needs_more_than_noise():
    assert speed_verdict([1.8], 0.05) == FASTER
    assert speed_verdict([1.03], 0.05) == NOISE
    assert speed_verdict([0.8], 0.05) == SLOWER
    assert speed_verdict([1.3, 0.98], 0.05) == NOISE  # repeats disagree
    assert speed_verdict([1.3], 0.4) == NOISE  # a noisy run cannot call 1.3 faster
    assert run_noise([0.1] * 10) == 0.05  # steady steps: the floor
    assert run_noise([0.05, 0.15] * 8) == pytest.approx(2 * 0.0516 / 0.1 / 4, rel=0.01)
