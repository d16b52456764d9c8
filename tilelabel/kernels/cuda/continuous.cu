// Continuous-value pixel Komura equivalence (KE), every connectivity (cc3d's delta): a voxel
// is united with the backward neighbours whose values differ from its own by at most d, both
// nonzero (a NaN joins nothing; 0 and -0.0 are background), the rule of the CPU's
// continuous.py (join_rule).
//
// As multilabel.cu, with that rule for "same value": Init links each nonzero voxel to its first
// joined backward neighbour; then pixel.cu's Compression, Reduction here (union with every
// joined backward neighbour), and pixel.cu's marking Compression, renumber.cu's scan and final
// labeling. V: the values as the rule compares them (an integer input's unsigned view, float
// or double).
#include "voxels.cuh"

// Whether neighbour u joins voxel v (value val): |img[u] - val| <= d, without wrapping around.
#define JOINS [=](u64 u) {                                                     \
    V w = img[u];                                                              \
    return w != (V)0 && (w == val || (w > val ? w - val : val - w) <= d);     \
}

// KE Init: link each nonzero voxel to its first joined backward neighbour.
template <typename T, typename V, int CONN>
__global__ void dl_ke_init(const V* __restrict__ img, T* L, T D, T H, T W, V d) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) {
            L[v] = (T)~(T)0;
            continue;
        }
        T p = (T)v;
        for_backward<T, CONN>(JOINS, v, z, y, x, H, W, HW, [&](u64 u, int) {
            p = (T)u;
            return false;
        });
        L[v] = p;
    }
}

// KE Reduction (after a Compression, L[v] is v's root or an ancestor of it): union with every
// joined backward neighbour.
template <typename T, typename V, int CONN>
__global__ void dl_ke_reduce(const V* __restrict__ img, T* L, T D, T H, T W, V d) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) continue;
        unite_voxel<T, CONN>(JOINS, L, v, L[v], z, y, x, H, W, HW);
    }
}
