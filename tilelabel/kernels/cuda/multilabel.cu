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

// Visit the backward neighbours u of voxel v = (z, y, x) that hold ``val`` under CONN (4 or 8
// in 2D; 6, 18 or 26 in 3D): fn(u, k) (k = the neighbour's index 0..12 in the 3x3x3 cube, a
// constant once unrolled) returns false to stop.
template <typename V, typename T, int CONN, typename F>
__device__ __forceinline__ void for_backward_same(const V* __restrict__ img, V val, u64 v, T z,
                                                  T y, T x, T H, T W, u64 HW, F fn) {
    constexpr bool IS3D = CONN == 6 || CONN == 18 || CONN == 26;
#pragma unroll
    for (int dz = (IS3D ? -1 : 0); dz <= 0; dz++)
#pragma unroll
        for (int dy = -1; dy <= 1; dy++)
#pragma unroll
            for (int dx = -1; dx <= 1; dx++) {
                if (dz == 0 && (dy > 0 || (dy == 0 && dx >= 0))) continue;
                int nz = (dz != 0) + (dy != 0) + (dx != 0);
                if ((CONN == 4 || CONN == 6) && nz > 1) continue;
                if (CONN == 18 && nz > 2) continue;
                if (dz < 0 && z == 0) continue;
                if (dy < 0 && y == 0) continue;
                if (dy > 0 && y + 1 >= H) continue;
                if (dx < 0 && x == 0) continue;
                if (dx > 0 && x + 1 >= W) continue;
                u64 u = (u64)((i64)v + dz * (i64)HW + dy * (i64)W + dx);
                if (img[u] == val && !fn(u, (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1))) return;
            }
}

#define ML_FOR_VOXELS(D, H, W)                                                               \
    T x = (T)blockIdx.x * blockDim.x + threadIdx.x;                                          \
    if (x >= W) return;                                                                       \
    u64 HW = (u64)H * W;                                                                      \
    for (T z = (T)blockIdx.z * blockDim.z + threadIdx.z; z < D; z += (T)gridDim.z * blockDim.z) \
        for (T y = (T)blockIdx.y * blockDim.y + threadIdx.y; y < H;                          \
             y += (T)gridDim.y * blockDim.y)

// KE Init: link each nonzero voxel to its first backward neighbour of the same value.
template <typename T, typename V, int CONN>
__global__ void ml_ke_init(const V* __restrict__ img, T* L, T D, T H, T W) {
    ML_FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) {
            L[v] = (T)~(T)0;
            continue;
        }
        T p = (T)v;
        for_backward_same<V, T, CONN>(img, val, v, z, y, x, H, W, HW, [&](u64 u, int) {
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
    ML_FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        V val = img[v];
        if (!val) continue;
        T P[13];
        u32 have = 0;
        for_backward_same<V, T, CONN>(img, val, v, z, y, x, H, W, HW, [&](u64 u, int k) {
            P[k] = L[u];
            have |= 1u << k;
            return true;
        });
        T r = L[v];
        T m1 = r, m2 = r, m3 = r;
#pragma unroll
        for (int k = 0; k < 13; k++) {
            if (!((have >> k) & 1)) continue;
            T pn = P[k];
            if (pn == r || pn == m1 || pn == m2 || pn == m3) continue;
            punion_call<T>(L, r, pn);
            m3 = m2;
            m2 = m1;
            m1 = pn;
        }
    }
}
