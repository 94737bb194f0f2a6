"""The serving commands' defaults, each stated once: the scheduler, the Python API and the command line's options
and help texts read them here. Plain numbers and no imports, so that the command line's start can load it.

The scheduler's are vLLM V1's for its API server on a data-centre GPU (vllm/engine/arg_utils.py, 0.10):
``max_num_seqs`` 256, ``max_num_batched_tokens`` 8,192 with chunked prefill on, KV blocks of 16 positions.
"""

MAX_NUM_SEQS = 256  # sequences one step may hold
MAX_NUM_BATCHED_TOKENS = 8192  # tokens one step may compute (the token budget), where the stack gives none
BLOCK_SIZE = 16  # positions a KV block holds

# The request sized when none is given: a 2,048-token prompt and 256 output tokens.
PROMPT = 2048
OUTPUT = 256

# Requests in a run when none is given: 200 under a Poisson rate; in a closed loop of C clients max(200,
# REQUESTS_PER_CLIENT × C), so that the p99 rests on several samples above it.
REQUESTS = 200
REQUESTS_PER_CLIENT = 8
