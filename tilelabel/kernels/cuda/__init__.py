"""The CUDA kernels: CUDA C sources, one per kernel family, beside the Python that compiles and
launches them through CuPy (:mod:`.compile`), and the ``cuda`` backend (:mod:`.backend`)."""
