"""CUDA C sources of the GPU kernels, one per kernel family (see tilelabel.kernels.gpu_compile)."""
