"""The words a learner meets before a lesson explains them, defined once, in plain language:
the Glossary tab, each lesson's "Words in this lesson" box (a definition on the same screen as
the word's first use), and links from a term's first use in a lesson's text to its entry.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

TERMS: dict[str, tuple[str, str]] = {
    "token": ("Token", "A word piece: the unit a model reads and writes. Prices, context limits "
              "and speeds are counted in tokens."),
    "forward": ("Forward pass", "One run of the whole model over some tokens: every layer, every "
                "weight read once. Prefill is one forward pass over the prompt; each decode step "
                "is one more, for one token."),
    "ttft": ("TTFT (time to first token)", "How long from sending a request until the first "
             "token appears: queueing plus the prefill."),
    "tpot": ("TPOT (time per output token)", "The time between tokens once the answer flows: one "
             "decode step. Tokens per second is 1 / TPOT."),
    "greedy": ("Greedy decoding", "Always take the single likeliest next token (temperature 0). "
               "The same prompt then gives the same answer on the same machine and batch "
               "(a near-tie can flip when the arithmetic changes)."),
    "kv": ("KV cache", "The keys and values every layer computed for the tokens so far, kept so a "
           "decode step only computes them for the one new token."),
    "kvheads": ("KV heads / query heads", "Attention splits into heads. Query heads ask, key/value "
                "heads are what gets stored. SmolLM2-135M has 9 query heads sharing 3 KV heads."),
    "gqa": ("GQA / MHA", "Grouped-query attention (several query heads share one key/value head, "
            "a smaller cache) versus multi-head attention (one key/value head per query head)."),
    "headdim": ("Head dim", "The length of one head's key or value vector (64 numbers in "
                "SmolLM2-135M)."),
    "dtype": ("dtype", "How each number is stored: float32 (4 bytes), float16/bfloat16 (2), int8 "
              "(1), 4-bit (half a byte). Fewer bytes, less memory to read per token."),
    "gguf": ("GGUF", "A single-file format for model weights used by llama.cpp. It can hold "
             "quantized weights such as Q4_1 and Q8_0; SmolLM2-135M is published in it too."),
    "q4": ("Q4_1 / Q8_0", "GGUF's block quantizations: weights in blocks of 32, each block 4-bit "
           "(Q4_1, with a scale and a minimum) or 8-bit (Q8_0, with a scale)."),
    "o1": ("O(1), O(n)", "How cost grows with length: O(1) stays the same however long the text, "
           "O(n) grows in proportion to it."),
    "p95": ("p95", "The 95th percentile: 95 of 100 requests were at least this fast. It shows "
            "the slow tail an average hides."),
    "kl": ("KL divergence (nats)", "How far one probability distribution is from another; 0 means "
           "identical. Used to compare a quantized model's next-token odds with the original's."),
    "roofline": ("Roofline", "The speed limit set by hardware. Decoding one token per pass (batch "
                 "1), tokens/s is at most memory bandwidth ÷ bytes read per token; more tokens "
                 "per pass (a batch, a prompt) share those bytes, until compute ÷ work per "
                 "token binds instead."),
    "batch": ("Batching", "Serving several requests with one forward pass, so the weights are "
              "read once for all of them."),
    "kernel": ("Kernel", "One small program the hardware runs, such as a matrix multiply; a "
               "forward pass launches many."),
    "dispatch": ("Dispatch overhead", "The fixed cost of starting one operation (choosing its "
                 "kernel, checking its inputs, launching it), paid whatever the operation's size. "
                 "A decode step of a small model is thousands of tiny operations, so it adds up."),
    "cudagraph": ("CUDA graph", "A recording of a whole sequence of GPU kernels, replayed later "
                  "with one launch instead of one per kernel. It removes the gaps between "
                  "launches on a GPU; it does not make the kernels themselves faster, so fusing "
                  "small kernels and batching close more of the distance to the roofline."),
    "prefill": ("Prefill", "The first forward pass of a request: the whole prompt at once, every "
                "position in parallel. It fills the KV cache and gives the first token."),
    "decode": ("Decode", "Every pass after the prefill: one new token per request per pass, "
               "each reading the KV cache of everything before it."),
    "throughput": ("Throughput", "Tokens produced per second for all requests together: what a "
                   "server's operator pays for (latency is what each user feels)."),
    "perplexity": ("Perplexity", "How surprised a model is by a text, on average: e to the mean "
                   "negative log-probability of each next token. Lower is better; 1 is certain."),
    "temperature": ("Temperature", "Divides the logits before the softmax: below 1 sharpens the "
                    "odds toward the likeliest token, above 1 flattens them; 0 means greedy."),
    "topkp": ("Top-k / top-p", "Sampling filters: top-k keeps only the k likeliest tokens, top-p "
              "the smallest set whose probabilities add up to p; one is then drawn from those."),
    "matmul": ("Matmul (matrix product)", "Multiplying two matrices: the bulk of a model's "
               "arithmetic. Each linear layer is one matmul of the activations by its weights."),
    "activations": ("Activations", "The vectors flowing between layers for the tokens being "
                    "processed (not the weights, not the KV cache); small for decode, large for "
                    "a long prefill or a big batch."),
    "flops": ("FLOPs, GFLOP/s", "Floating-point operations (one multiply or one add each). "
              "GFLOP/s: billions of them per second, the speed of arithmetic."),
    "intensity": ("Arithmetic intensity (FLOPs per byte)", "FLOPs a pass does for each byte it "
                  "reads from memory. Low intensity: the bandwidth roof is the most it can "
                  "reach; high: the compute roof."),
    "ridge": ("Ridge point", "The arithmetic intensity where the two roofs meet: peak FLOP/s ÷ "
              "bandwidth. Left of it the bandwidth roof is a pass's ceiling, right of it the "
              "compute roof."),
    "bound": ("Memory-bound / compute-bound", "What a step spends its time waiting for: reading "
              "memory, or arithmetic. The app decides it from the measured share of each roof a "
              "step reached; a step near neither is bound by something else (dispatch, "
              "launches)."),
    "synced": ("Synced (timing)", "A GPU runs work after Python has moved on; a synced clock "
               "waits until the device has finished before reading the time, so the time is the "
               "work's, not the launch's."),
    "simd": ("AVX2 / AVX-512 / AMX", "Instruction sets of x86 CPUs that do many multiplies in "
             "one instruction (8, 16, or whole tiles of numbers). Which one a CPU has decides "
             "how fast its matmuls and int8 kernels can be."),
    "continuous": ("Continuous batching", "Requests join and leave the running batch between "
                   "decode steps, instead of waiting for a whole batch to finish."),
    "padding": ("Padding", "Filler positions that make rows of different lengths the same "
                "length in one tensor; masked out, but still stored and often still computed."),
    "chunked": ("Chunked prefill", "A long prompt is prefilled in pieces, one piece per step, in "
                "the same passes that decode the running requests, so their streams keep flowing."),
    "prefix": ("Prefix reuse / prefix caching", "Requests that start with the same tokens (a "
               "system message, a shared document) reuse the cached keys and values of that "
               "start instead of prefilling it again."),
    "quant": ("Quantization", "Storing weights (or the cache) in fewer bits, such as int8 or "
              "4-bit, with a scale to turn them back into numbers: fewer bytes to read."),
    "block": ("Block (KV page)", "A fixed-size piece of KV cache memory holding the keys and "
              "values of a few positions (16, say). A serving engine's KV memory is one "
              "pool of them, shared by every request."),
    "blocktable": ("Block table", "A request's list of the blocks that hold its positions, in "
                   "order: position p lives in the block its entry p ÷ block size names, at the "
                   "remainder. "
                   "The request's cache need not sit in one piece of memory."),
    "fragmentation": ("Fragmentation", "Memory held but not used. Inside a block: the empty "
                      "slots of a request's last, partly filled block. Between requests: room "
                      "reserved or padded for tokens a request does not have (a padded batch "
                      "is as wide as its longest row)."),
    "preemption": ("Preemption", "When the pool has no free block for a running request, the "
                   "newest request gives its blocks back and waits at the front of the queue; "
                   "when it resumes, its tokens so far are computed again and it continues with "
                   "the same tokens (in exact arithmetic: a near-tie can flip in floating "
                   "point)."),
    "prefixcache": ("Prefix caching", "Reusing the stored keys and values of a prompt's start "
                    "that an earlier request already computed (the chat template, a shared "
                    "system prompt): full blocks are found by a hash of their tokens and all "
                    "tokens before them, and only the rest of the prompt is prefilled."),
    "draft": ("Draft", "A cheap guesser for speculative decoding: it proposes the next few "
              "tokens (from the text so far, or from a smaller model)."),
    "verify": ("Verification pass", "One forward pass of the real model over the draft's "
               "tokens: it scores them all at once and keeps those it agrees with."),
    "acceptance": ("Acceptance rate", "The share of drafted tokens the model kept. Tokens per "
                   "pass is what it buys: above one, fewer passes of the big model; faster only "
                   "if the draft's steps and the wider verify pass cost less than those saved."),
    "speculative": ("Speculative decoding", "Draft several tokens cheaply, check them in one "
                    "pass of the real model, keep the agreeing ones plus the model's own next "
                    "token: the same output in exact arithmetic, in fewer passes."),
    "window": ("Sliding window", "Attention that looks back only over the last W tokens, so its "
               "cache and cost stop growing past W (a model must be trained for it)."),
    "flash": ("FlashAttention", "Computing attention in tiles that stay in fast on-chip memory, "
              "so the L × L score matrix is never written out to slow memory."),
    "lstar": ("L* (cache reads = weight reads)", "The cache length at which one decode step reads "
              "as many bytes of keys and values as of weights: weight bytes ÷ (batch × KV bytes "
              "per token). Past it, the cache is most of what a step reads."),
    "eager_sdpa": ("Eager / sdpa attention", "Two ways to run the same attention: eager writes "
                   "each layer's whole L × L table of scores to memory; sdpa (PyTorch's scaled "
                   "dot-product attention) picks a fused kernel, tiled where the device has one."),
}


def term_md(key: str, anchor: bool = False) -> str:
    name, definition = TERMS[key]
    mark = f"<a id='gl-{key}'></a>" if anchor else ""
    return f"- {mark}**{name}**: {definition}"


def glossary_md() -> str:
    """Every term, for the Glossary tab."""
    return ("## Glossary\nThe words this app uses, in plain language. Each lesson also lists its "
            "own under **Words in this lesson**.\n\n"
            + "\n".join(term_md(k, anchor=True) for k in TERMS))


def lesson_words_md(keys: list[str]) -> str:
    """A lesson's own terms (unknown keys are a mistake: KeyError)."""
    return "\n".join(term_md(k) for k in keys)


# How a term is found in text, where its name's parts ("KV heads / query heads" -> both) are
# not how lessons write it, or are too common a word to link ("Block", "Eager").
FORMS: dict[str, tuple[str, ...]] = {
    "greedy": ("greedy decoding", "greedy"),
    "kl": ("KL divergence", "KL"),
    "headdim": ("head dim", "head_dim", "head dimension"),
    "gqa": ("grouped-query attention", "GQA", "MHA"),
    "matmul": ("matmul", "matrix product", "matrix multiply"),
    "intensity": ("arithmetic intensity", "FLOPs per byte"),
    "dispatch": ("dispatch overhead", "dispatch"),
    "block": ("KV page", "KV block"),
    "quant": ("quantization", "quantized"),
    "batch": ("batching", "batched"),
    "bound": ("memory-bound", "compute-bound", "memory bound", "compute bound"),
    "prefix": ("prefix reuse",),
    "prefixcache": ("prefix caching", "prefix cache"),
    "eager_sdpa": ("sdpa", "eager attention"),
    "lstar": ("L*",),
}


def term_forms(key: str) -> tuple[str, ...]:
    """How term `key` is written in lesson text: `FORMS`, or its name without the bracket,
    split at "/" and "," ("TTFT (time to first token)" -> "TTFT"; "O(1), O(n)" -> both)."""
    if key in FORMS:
        return FORMS[key]
    name = TERMS[key][0]
    base = name if name.startswith("O(") else re.sub(r"\s*\([^)]*\)", "", name)
    return tuple(p for p in re.split(r"\s+/\s+|,\s*", base) if p)


def term_href(key: str) -> str:
    """Where a term's link goes: the Glossary tab, at the term's entry (`gl-<key>`)."""
    return f"?lesson=glossary#gl-{key}"


# Left as written: fenced and inline code, links and images, HTML (an element with its text,
# a lone tag), headings, bare addresses.
_KEEP = re.compile(r"```.*?```|`[^`\n]*`|!?\[[^\]]*\]\([^)]*\)|<(\w+)\b[^>]*>.*?</\1\s*>|<[^>]+>"
                   r"|^#{1,6} [^\n]*|https?://\S+", re.DOTALL | re.MULTILINE)


def _form_pattern(written: str) -> str:
    """A form as a pattern: a plural s allowed; an acronym ("KL", "TTFT") in its case only."""
    body = re.escape(written) + ("(?:e?s)?" if written[-1].isalpha() else "")
    return f"(?-i:{body})" if written.isupper() else body


def link_terms(markdown: str, keys: Iterable[str] | None = None) -> str:
    """`markdown` with the first use of each term (`keys`: all by default) linked to its entry,
    titled with its definition; later uses, and code, links, HTML and headings, left as they are.

    >>> link_terms("The KV cache, and the KV cache again.").count("](?lesson=glossary#gl-kv")
    1
    """
    found = [(f, k) for k in (keys if keys is not None else TERMS) for f in term_forms(k)]
    # (pattern, key), longest first: "KV cache" wins over a shorter form starting there
    forms = [(_form_pattern(f), k) for f, k in sorted(found, key=lambda fk: -len(fk[0]))]
    pattern = re.compile(r"(?<![\w/-])(?:" + "|".join(p for p, _ in forms) + r")(?![\w/-])",
                         re.IGNORECASE)
    linked: set[str] = set()

    def link(m: re.Match) -> str:
        key = next(k for p, k in forms if re.fullmatch(p, m.group(0), re.IGNORECASE))
        if key in linked:
            return m.group(0)
        linked.add(key)
        name, definition = TERMS[key]
        title = f"{name}: {definition}".replace('"', "'")
        return f'[{m.group(0)}]({term_href(key)} "{title}")'

    out, at = [], 0
    for kept in _KEEP.finditer(markdown):
        out.append(pattern.sub(link, markdown[at:kept.start()]))
        out.append(kept.group(0))
        at = kept.end()
    out.append(pattern.sub(link, markdown[at:]))
    return "".join(out)
