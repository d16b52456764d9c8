// The voxel forest shared by the voxel families (pixel.cu: UF and KE; multilabel.cu: KE over
// values; seg.cu: SEG), and the walk over a voxel's backward neighbours of its class.
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

// Visit the backward neighbours u of voxel v = (z, y, x) under CONN (4 or 8 in 2D; 6, 18 or 26
// in 3D) that are of v's class (``same(u)``): fn(u, k) (k = the neighbour's index 0..12 in the
// 3x3x3 cube, a constant once unrolled) returns false to stop.
template <typename T, int CONN, typename S, typename F>
__device__ __forceinline__ void for_backward(S same, u64 v, T z, T y, T x, T H, T W, u64 HW,
                                             F fn) {
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
                if (same(u) && !fn(u, (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1))) return;
            }
}

// Every voxel (z, y, x) of a D x H x W grid: x from the thread, z and y in grid-stride loops.
#define FOR_VOXELS(D, H, W)                                                                  \
    T x = (T)blockIdx.x * blockDim.x + threadIdx.x;                                          \
    if (x >= W) return;                                                                       \
    u64 HW = (u64)H * W;                                                                      \
    for (T z = (T)blockIdx.z * blockDim.z + threadIdx.z; z < D; z += (T)gridDim.z * blockDim.z) \
        for (T y = (T)blockIdx.y * blockDim.y + threadIdx.y; y < H;                          \
             y += (T)gridDim.y * blockDim.y)

// Unions of voxel v (r: an ancestor of v) with its backward neighbours of its class: their
// entries (ancestors) are loaded first, and a neighbour whose entry is r, or an entry already
// united with v by this thread, needs no union.
template <typename T, int CONN, typename S>
__device__ __forceinline__ void unite_voxel(S same, T* L, u64 v, T r, T z, T y, T x, T H, T W,
                                            u64 HW) {
    T P[13];
    u32 have = 0;
    for_backward<T, CONN>(same, v, z, y, x, H, W, HW, [&](u64 u, int k) {
        P[k] = L[u];
        have |= 1u << k;
        return true;
    });
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

#endif  // TILELABEL_VOXELS_CUH
