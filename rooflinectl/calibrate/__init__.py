"""``rooflinectl calibrate``: the GPU's measured ceilings and op model written into a hardware file (``run``,
``op_model``, ``probes``: the grid of cases it times), and the collectives between GPUs (``comm``, ``comm_run``).
Torch is imported inside the functions that need it."""
