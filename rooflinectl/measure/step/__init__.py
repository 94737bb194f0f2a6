"""``rooflinectl measure --workload``: the engine's op list of a step run as the kernels a PyTorch serving stack
runs, each op checked and timed, then the whole step captured as one CUDA graph and timed.

- ``support``: what can be run faithfully (an allow-list); a one-line refusal for the rest.
- ``cases``: one case per engine op at its exact shapes, read from the op's fields.
- ``runners``: the torch calls (F.linear, SDPA, F.rms_norm, ...), shared by the cases and the graph.
- ``execute``: a case's tensors, its run and its check against a float32 reference.
- ``graph``: the whole step, layer by layer, as one callable (captured as one CUDA graph on the GPU).
- ``run``: the run: cases, checks, timings, the step, predictions; the saved record is ``records.step``.

Torch is imported inside the functions that need it.
"""
