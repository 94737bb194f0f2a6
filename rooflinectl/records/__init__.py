"""The JSON records the GPU-side commands write and render and plot read, without torch: ``kernel`` (``measure``
and ``calibrate``'s ceilings), ``step`` (``measure --workload``), ``profile`` (``rooflinectl profile``). Each has a
``kind`` and a ``schema_version``; ``read`` reads any of them, dispatching on the kind once."""

# A run's input seed: torch.Generator.manual_seed takes up to 2**64 − 1, and a run seeds shape or op i with
# seed + 1000·i (about 10**5 ops at most): 2**63 leaves that room and any seed a person types. Here, in the
# package's light module, so that the CLI's --seed bound loads no record schema.
MAX_SEED = 2**63
