"""The block pool's bookkeeping, on hand-made token lists (pure: no model, no tensors):
block tables grow one block at a time, shared prefixes are mapped by chain hash with
reference counts, idle cached blocks are evicted least-recently-used, and nothing leaks."""
import pytest

from inference.block_pool import BlockPool, block_hash, blocks_for
from inference.errors import PoolFullError


def test_paged_table_takes_a_block_only_when_the_last_one_fills():
    pool = BlockPool(num_blocks=8, block_tokens=4)
    table = pool.allocate(1, list(range(6)))  # 6 positions -> 2 blocks
    assert len(table) == 2 and pool.counts().blocks_used == 2
    assert pool.grow(1, 7) is None and pool.grow(1, 8) is None  # still inside block 2
    new = pool.grow(1, 9)  # position 8 starts block 3
    assert new is not None and pool.tables[1] == table + [new]
    assert pool.counts().blocks_free == 5


def test_paged_admission_asks_for_blocks_needed_now():
    pool = BlockPool(num_blocks=3, block_tokens=4)
    assert pool.can_allocate(12) and not pool.can_allocate(13)  # 3 blocks of 4
    pool.allocate(1, list(range(9)))
    with pytest.raises(PoolFullError):
        pool.allocate(2, [1])


def test_prefix_cache_chain_hash_depends_on_everything_before():
    a, b = block_hash(None, [1, 2, 3, 4]), block_hash(None, [9, 9, 9, 9])
    assert block_hash(a, [5, 6, 7, 8]) != block_hash(b, [5, 6, 7, 8])
    assert block_hash(a, [5, 6, 7, 8]) == block_hash(block_hash(None, [1, 2, 3, 4]), [5, 6, 7, 8])


def test_prefix_cache_shares_full_blocks_with_reference_counts():
    pool = BlockPool(num_blocks=10, block_tokens=4)
    prompt = list(range(10))  # blocks [0..3] [4..7] full, [8, 9] partial
    t1 = pool.allocate(1, prompt)
    pool.commit_full(1, prompt)
    other = prompt[:8] + [50, 51, 52]
    hits = pool.cached_prefix(other)
    assert hits == t1[:2]  # both full blocks, not the partial one
    t2 = pool.allocate(2, other, hits)
    assert t2[:2] == t1[:2] and t2[2] != t1[2]
    assert [pool.ref[b] for b in t1[:2]] == [2, 2] and pool.counts().blocks_shared == 2
    pool.release(1)
    assert [pool.ref[b] for b in t2[:2]] == [1, 1]
    # a different first block: no hit at all, even with the same second block's tokens
    assert pool.cached_prefix([99] + prompt[1:]) == []


def test_prefix_cache_always_leaves_the_last_token_to_compute():
    pool = BlockPool(num_blocks=4, block_tokens=4)
    pool.allocate(1, list(range(8)))
    pool.commit_full(1, list(range(8)))
    assert len(pool.cached_prefix(list(range(8)))) == 1  # 7 tokens at most: one block
    assert len(pool.cached_prefix(list(range(9)))) == 2


def test_prefix_cache_idle_blocks_stay_cached_then_evict_lru():
    pool = BlockPool(num_blocks=4, block_tokens=2)
    for rid, first in ((1, 10), (2, 20)):
        toks = [first, first + 1, first + 2, first + 3]  # two full blocks each
        pool.allocate(rid, toks)
        pool.commit_full(rid, toks)
    pool.release(1)  # request 1's blocks become idle first: least recently used
    pool.release(2)
    c = pool.counts()
    assert (c.blocks_used, c.blocks_cached_idle, c.blocks_free) == (0, 4, 0)
    assert len(pool.cached_prefix([20, 21, 22, 23, 0])) == 2  # still hit while idle
    pool.allocate(3, [7])  # needs one block: evicts request 1's tail block first
    assert pool.evictions == 1
    assert len(pool.cached_prefix([10, 11, 12, 13, 0])) == 1  # its head block is still cached
    assert len(pool.cached_prefix([20, 21, 22, 23, 0])) == 2


def test_prefix_cache_mapping_an_idle_block_takes_it_out_of_eviction():
    pool = BlockPool(num_blocks=2, block_tokens=2)
    pool.allocate(1, [1, 2])
    pool.commit_full(1, [1, 2])
    pool.release(1)
    hits = pool.cached_prefix([1, 2, 3])
    assert pool.can_allocate(3, hits)  # the hit + one more block: 2 of 2
    pool.allocate(2, [1, 2, 3], hits)
    assert pool.counts().blocks_cached_idle == 0 and pool.available() == 0
    assert pool.ref[hits[0]] == 1


def test_paged_pool_is_empty_after_every_request_ends():
    pool = BlockPool(num_blocks=9, block_tokens=3)
    for rid in range(3):
        pool.allocate(rid, list(range(rid, rid + 4)))
        pool.grow(rid, 7)
    for rid in range(3):
        pool.release(rid)
    c = pool.counts()
    assert c.blocks_used == 0 and c.blocks_free + c.blocks_cached_idle == 9 and not pool.tables
    assert sum(pool.ref) == 0


def test_paged_grow_raises_when_nothing_is_left():
    pool = BlockPool(num_blocks=1, block_tokens=2)
    pool.allocate(1, [1, 2])
    with pytest.raises(PoolFullError):
        pool.grow(1, 3)
    assert blocks_for(0, 4) == 0 and blocks_for(5, 4) == 2


def test_paged_prefill_groups_rows_of_similar_length():
    from inference.paged_batch import length_groups

    groups = length_groups({0: 40, 1: 1050, 2: 41, 3: 1050, 4: 39, 5: 1049})
    assert sorted(map(sorted, groups)) == [[0, 2, 4], [1, 3, 5]]
    assert length_groups({0: 40, 1: 41, 2: 40}) == [[1, 0, 2]]  # the class: one pass
    assert length_groups({0: 100, 1: 10}, slack=0.0) == [[0], [1]]


def test_admission_a_full_pool_waits_and_a_freed_block_admits():
    from inference.server_plan import WAIT_BLOCKS, WAIT_BUDGET, WAIT_ROWS, admission

    pool = BlockPool(num_blocks=3, block_tokens=4)
    pool.allocate(0, list(range(8)))  # two blocks held by a running request
    pool.allocate(1, [50, 51, 52])  # the third
    newcomer = [90, 91, 92, 93, 94]  # needs two blocks now
    assert admission(pool, newcomer, rows=2, max_rows=8, budget_left=100) == WAIT_BLOCKS
    pool.release(1)  # one block back: still one short
    assert admission(pool, newcomer, 1, 8, 100) == WAIT_BLOCKS
    assert admission(pool, newcomer[:4], 1, 8, 100) == ""  # a one-block prompt fits
    pool.commit_full(0, list(range(8)))
    pool.release(0)  # its full blocks stay cached, idle: evictable, so they count as room
    assert pool.counts().blocks_cached_idle == 2 and admission(pool, newcomer, 0, 8, 100) == ""
    # the other limits come first: a free row (max_num_seqs), then the step's token budget
    assert admission(pool, newcomer, 8, 8, 100) == WAIT_ROWS
    assert admission(pool, newcomer, 0, 8, 0) == WAIT_BUDGET


def test_admission_maps_a_cached_prefix_instead_of_needing_its_blocks():
    from inference.server_plan import admission

    pool = BlockPool(num_blocks=2, block_tokens=2)
    pool.allocate(0, [1, 2, 3, 4])
    pool.commit_full(0, [1, 2, 3, 4])  # both blocks held and keyed
    assert admission(pool, [1, 2, 3, 4, 5], 1, 8, 100) != ""  # needs a third block
    assert admission(pool, [1, 2, 3], 1, 8, 100) != ""  # maps one, needs one more: none free
    pool.release(0)
    assert admission(pool, [1, 2, 3], 0, 8, 100) == ""


def test_a_class_reuses_the_blocks_earlier_answers_wrote():
    """Free blocks go out last-freed first: a burst after a burst writes the same blocks, so
    the memory a process holds stays the size of one burst, not the whole pool."""
    pool = BlockPool(num_blocks=100, block_tokens=4)
    written: set[int] = set()
    for burst in range(5):
        for rid in range(10):
            written.update(pool.allocate(burst * 10 + rid, [burst, rid, 7]))  # no full block
        for rid in range(10):
            pool.release(burst * 10 + rid)
    assert len(written) == 10  # 5 bursts of 10 one-block answers touched 10 blocks, not 50


def test_idle_cached_blocks_are_capped_oldest_first():
    pool = BlockPool(num_blocks=20, block_tokens=2, max_idle=3)
    for rid in range(4):  # four answers, each two full blocks of its own
        tokens = [rid, rid, rid, rid]
        pool.allocate(rid, tokens)
        pool.commit_full(rid, tokens)
    for rid in range(4):
        pool.release(rid)
    c = pool.counts()
    assert (c.blocks_cached_idle, c.blocks_used, c.blocks_cached_idle + c.blocks_free) == (3, 0, 20)
    assert pool.cached_prefix([3, 3, 3, 3]) != [] and pool.cached_prefix([0, 0, 0, 0]) == []
    assert pool.evictions == 5  # 8 idle, 3 kept: the oldest 5 went back to the free blocks
