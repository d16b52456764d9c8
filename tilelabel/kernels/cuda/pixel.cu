// Pixel-based union-find (UF) and Komura equivalence (KE), for every connectivity: the ones that
// 2x2(x2) blocks cannot serve (2D 4, 3D 6 and 18) and a baseline for 8 and 26.
//
// The forest is the label array, one node per voxel (voxels.cuh).  UF: Init (every foreground
// voxel a root), Merge (union with every foreground backward neighbour).  KE: Init links each
// voxel to its first foreground backward neighbour, Compression, Reduction.  Both end with the
// marking Compression, renumber.cu's scan and the final labeling.
#include "voxels.cuh"

template <typename T>
__global__ void uf_init(const u8* __restrict__ img, T* L, u64 N) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x)
        L[v] = img[v] ? (T)v : (T)~(T)0;
}

// Visit the foreground backward neighbours u of voxel v = (z, y, x) under CONN (4 or 8 in 2D;
// 6, 18 or 26 in 3D): fn(u, k) (k = the neighbour's index 0..12 in the 3x3x3 cube, a constant
// once unrolled) returns false to stop.
template <typename T, int CONN, typename F>
__device__ __forceinline__ void for_backward(const u8* __restrict__ img, u64 v, T z, T y, T x, T H,
                                             T W, u64 HW, F fn) {
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
                if (img[u] && !fn(u, (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1))) return;
            }
}

#define FOR_VOXELS(D, H, W)                                                                  \
    T x = (T)blockIdx.x * blockDim.x + threadIdx.x;                                          \
    if (x >= W) return;                                                                       \
    u64 HW = (u64)H * W;                                                                      \
    for (T z = (T)blockIdx.z * blockDim.z + threadIdx.z; z < D; z += (T)gridDim.z * blockDim.z) \
        for (T y = (T)blockIdx.y * blockDim.y + threadIdx.y; y < H;                          \
             y += (T)gridDim.y * blockDim.y)

// Unions of voxel v (r: an ancestor of v) with its foreground backward neighbours: their values
// (ancestors) are loaded first, and a neighbour whose value is r, or a value already united with
// v by this thread, needs no union.
template <typename T, int CONN>
__device__ __forceinline__ void unite_voxel(const u8* __restrict__ img, T* L, u64 v, T r, T z, T y,
                                            T x, T H, T W, u64 HW) {
    T P[13];
    u32 have = 0;
    for_backward<T, CONN>(img, v, z, y, x, H, W, HW, [&](u64 u, int k) {
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

// UF Merge: union with every foreground backward neighbour.
template <typename T, int CONN>
__global__ void uf_merge(const u8* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        if (!img[v]) continue;
        unite_voxel<T, CONN>(img, L, v, (T)v, z, y, x, H, W, HW);
    }
}

// KE Init: link each foreground voxel to its first foreground backward neighbour.
template <typename T, int CONN>
__global__ void ke_init(const u8* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        if (!img[v]) {
            L[v] = (T)~(T)0;
            continue;
        }
        T p = (T)v;
        for_backward<T, CONN>(img, v, z, y, x, H, W, HW, [&](u64 u, int) {
            p = (T)u;
            return false;
        });
        L[v] = p;
    }
}

// KE Reduction (after a Compression, L[v] is v's root or an ancestor of it).
template <typename T, int CONN>
__global__ void ke_reduce(const u8* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        if (!img[v]) continue;
        unite_voxel<T, CONN>(img, L, v, L[v], z, y, x, H, W, HW);
    }
}

// Compression + root bitmap: one warp per 32 consecutive voxels, so each warp writes one word.
template <typename T, bool IC, bool MARK>
__global__ void uf_compress_mark(T* L, u32* bitmap, u64 N) {
    const T BG = (T)~(T)0;
    u64 lane = threadIdx.x & 31;
    u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 base = warp * 32; base < N; base += nwarps * 32) {
        u64 v = base + lane;
        bool root = false;
        if (v < N) {
            T a = L[v];
            if (a != BG) {
                if (a == (T)v) {
                    root = true;
                } else if (IC) {
                    T p;
                    while ((p = L[(u64)a]) != a) {
                        a = p;
                        L[v] = a;
                    }
                } else {
                    L[v] = pfind<T>(L, a);
                }
            }
        }
        if (MARK) {
            u32 bits = __ballot_sync(0xffffffffu, root);
            if (lane == 0) bitmap[base >> 5] = bits;
        }
    }
}

template <typename T>
__global__ void uf_final(T* L, const u32* __restrict__ bitmap, const T* __restrict__ prefix,
                         u64 N) {
    const T BG = (T)~(T)0;
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x) {
        T a = L[v];
        L[v] = (a == BG) ? (T)0 : rank_of<T>(a, bitmap, prefix);
    }
}
