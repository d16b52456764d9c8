// Pixel-based union-find (UF) and Komura equivalence (KE), for every connectivity: the ones that
// 2x2(x2) blocks cannot serve (2D 4, 3D 6 and 18) and a baseline for 8 and 26.
//
// The forest is the label array, one node per voxel (voxels.cuh).  UF: Init (every foreground
// voxel a root), Merge (union with every foreground backward neighbour).  KE: Init links each
// voxel to its first foreground backward neighbour, Compression, Reduction.  Both end with the
// marking Compression, renumber.cu's scan and the final labeling.
#include "voxels.cuh"

// The class of a neighbour u: foreground.
#define FOREGROUND [=](u64 u) { return img[u] != 0; }

template <typename T>
__global__ void uf_init(const u8* __restrict__ img, T* L, u64 N) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x)
        L[v] = img[v] ? (T)v : (T)~(T)0;
}

// UF Merge: union with every foreground backward neighbour.
template <typename T, int CONN>
__global__ void uf_merge(const u8* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        if (!img[v]) continue;
        unite_voxel<T, CONN>(FOREGROUND, L, v, (T)v, z, y, x, H, W, HW);
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
        for_backward<T, CONN>(FOREGROUND, v, z, y, x, H, W, HW, [&](u64 u, int) {
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
        unite_voxel<T, CONN>(FOREGROUND, L, v, L[v], z, y, x, H, W, HW);
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
