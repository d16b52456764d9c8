// The voxel forest shared by the voxel families (pixel.cu: UF and KE; seg.cu: SEG).
//
// The forest is the label array, one node per voxel: a voxel's entry is the raster index of an
// ancestor (a root's is its own index), background voxels hold the sentinel ~0 until the final
// pass.  Union by smaller index makes every root its component's first voxel, the component's
// scipy key, so renumbering needs no per-component minimum (renumber.cu).
#ifndef TILELABEL_VOXELS_CUH
#define TILELABEL_VOXELS_CUH

#include "common.cuh"

template <typename T>
__device__ __forceinline__ T pfind(const T* L, T a) {
    T p;
    while ((p = L[(u64)a]) != a) a = p;
    return a;
}

// Union by smaller index with atomicMin on the root (Komura's reduction as in Playne & Hawick):
// when another thread linked the root first, its old parent is united with ours in the next
// round.  Every link goes from a larger index to a smaller one: no cycles.
template <typename T>
__device__ __forceinline__ void punion(T* L, T a, T b) {
    bool done;
    do {
        a = pfind<T>(L, a);
        b = pfind<T>(L, b);
        if (a < b) {
            T old = amin<T>(&L[(u64)b], a);
            done = (old == b);
            b = old;
        } else if (b < a) {
            T old = amin<T>(&L[(u64)a], b);
            done = (old == a);
            a = old;
        } else {
            done = true;
        }
    } while (!done);
}

// The same, not inlined: called from unrolled loops over neighbours (keeps the code small).
template <typename T>
__device__ __noinline__ void punion_call(T* L, T a, T b) {
    punion<T>(L, a, b);
}

#endif  // TILELABEL_VOXELS_CUH
