"""The distributed half of tilelabel: plan, local labels, merge, numbering, relabel, zarr I/O.

The pipeline asks a :class:`tilelabel.kernels.Backend` for device work and knows nothing of CUDA.
"""
