"""A serving engine simulated over many steps: requests arrive (a closed or an open loop, or a trace), a scheduler
forms each step from groups of sequences (a token budget, chunked prefill, decode first, FCFS), a paged KV cache
holds their positions (preemption by recompute when blocks run out), and each step's time comes from the engine's
roofline (``engine.roofline.analyze`` of that step, cached per shape) plus the serving stack's own costs. Pure: no
I/O, no torch, no sentences.

  defaults.py   the defaults every serving command and function reads: scheduler limits, request sizes, counts
  load.py       requests: lengths (fixed or drawn), arrivals (closed loop, Poisson, a trace)
  kvcache.py    the paged KV cache: blocks per request, prefix caching
  capacity.py   the KV blocks a GPU holds beside the model (weights, activations, the reserve)
  scheduler.py  which sequences run in the next step, and how many new tokens each
  stepmodel.py  a step's time from the engine, cached per shape
  speculation.py  speculative decoding: drafts verified a step, their acceptance and the drafter's cost
  cost.py       dollars per million tokens at a GPU-hour price, joules per output token at board power
  simulate.py   the event loop of one engine
  metrics.py    a run's results and their metrics (TTFT, TPOT, ITL, E2E percentiles, throughput, goodput)
  replicas.py, ranks.py, transfer.py, deployed.py, batch.py: several replicas, data-parallel ranks, the KV
                transfer between sides, the deployments compare sets, the closed batch
"""
