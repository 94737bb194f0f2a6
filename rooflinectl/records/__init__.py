"""The JSON records the GPU-side commands write and render and plot read, without torch: ``kernel`` (``measure``
and ``calibrate``'s ceilings), ``step`` (``measure --workload``), ``profile`` (``rooflinectl profile``). Each has a
``kind`` and a ``schema_version``; ``read`` reads any of them, dispatching on the kind once."""
