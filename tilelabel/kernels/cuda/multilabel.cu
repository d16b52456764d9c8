// Multi-label pixel Komura equivalence (KE), every connectivity: each nonzero value is a class
// of its own, and a voxel is united only with backward neighbours of its own value (cc3d's
// connected_components).
//
// The forest is the label array, one node per voxel (voxels.cuh).  Init links each voxel to
// its first backward neighbour of the same value; then pixel.cu's Compression, Reduction here
// (union with every backward neighbour of the same value), and pixel.cu's marking Compression,
// renumber.cu's scan and final labeling, as for the binary KE.  The values are unsigned
// integers of the input's own width V (a signed input is read through its unsigned view).
#include "voxels.cuh"

// The class of a neighbour u: the value of voxel v.
#define SAME_VALUE [=](u64 u) { return img[u] == val; }

// KE Init: link each nonzero voxel to its first backward neighbour of the same value.
template <typename T, typename V, int CONN>
__global__ void ml_ke_init(const V* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) {
            L[v] = (T)~(T)0;
            continue;
        }
        T p = (T)v;
        for_backward<T, CONN>(SAME_VALUE, v, z, y, x, H, W, HW, [&](u64 u, int) {
            p = (T)u;
            return false;
        });
        L[v] = p;
    }
}

// KE Reduction (after a Compression, L[v] is v's root or an ancestor of it): union with every
// backward neighbour of the same value.  Their entries are loaded first; one whose entry is
// v's, or one already united by this thread, needs no union.
template <typename T, typename V, int CONN>
__global__ void ml_ke_reduce(const V* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) continue;
        unite_voxel<T, CONN>(SAME_VALUE, L, v, L[v], z, y, x, H, W, HW);
    }
}
