// Storage tiles (tilelabel.kernels.tiles): which tiles of a slab hold a nonzero value.
//
// One block per tile, each thread ORs the words it reads; a kernel of our own rather than CuPy's
// any(axis=1), whose reduction takes seconds to compile in a fresh process, on the writing
// pass's critical path.
#include "common.cuh"

template <typename W>
__global__ void tile_nonzero(const W* __restrict__ words, i64 per_tile, u8* __restrict__ flags) {
    const W* w = words + (i64)blockIdx.x * per_tile;
    int any = 0;
    for (i64 i = threadIdx.x; i < per_tile; i += blockDim.x) any |= (w[i] != 0);
    any = __syncthreads_or(any);
    if (threadIdx.x == 0) flags[blockIdx.x] = (u8)any;
}
