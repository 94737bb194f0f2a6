"""``rooflinectl profile``: a real model's kernels charged to the engine's ops.

``build`` (the Hugging Face model from a config, random weights, the static cache), ``ranges`` (record_function
ranges named by the engine's ops, from forward hooks and wrapped functions), ``trace`` (the profiler's events),
``attribute`` (pure: each event to an op's work, its overhead, or unattributed), ``run`` (the flow); the saved
record is ``records.profile``. torch and transformers are imported inside functions only.
"""
