"""``rooflinectl measure --workload``: the engine's op list of a workload run as the kernels a PyTorch serving stack
runs, each op checked and timed, then the whole step captured as one CUDA graph and timed; and the probes that
``calibrate`` times for its op model.

- ``support``: what can be run faithfully; a one-line refusal for the rest.
- ``cases``: one case per engine op at its exact shapes, its own count checked against the engine's.
- ``runners``: the torch calls (F.linear, SDPA, F.rms_norm, ...), shared by the cases and the step.
- ``execute``: a case's tensors, its run and its check against a float32 reference.
- ``step``: the whole step, layer by layer, as one callable (captured as one CUDA graph on the GPU).
- ``run``: the run: cases, checks, timings, the step, predictions; ``records``: the saved record.
- ``probes``: the documented grid of cases ``calibrate`` times.

Torch is imported inside the functions that need it.
"""
