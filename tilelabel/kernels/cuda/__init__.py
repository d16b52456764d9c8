"""CUDA C sources of the GPU kernels, loaded through cupy.RawModule by tilelabel.kernels.gpu."""
