"""A hand-made stand-in for `StepEvent` with the fields the decode text builders read."""
from dataclasses import dataclass


@dataclass
class Ev:
    index: int
    piece: str
    special: bool
    token_id: int
    chosen_by: str
    seconds: float
    forward_tokens: int
    cache_tokens: int
    cache_bytes: int
