"""The CPU kernels: numba, sequential per chunk (:mod:`.algorithms`), and the ``cpu`` backend
(:mod:`.backend`); the executable specification of the CUDA kernels."""
