// OLE: Kalentev et al.'s optimised label equivalence (J. Parallel Distrib. Comput. 2011), 2D 4-
// and 8-connectivity.
//
// The label array is the output array itself (the paper's point: no reference array).  A
// foreground pixel starts with its own raster index as label (pixel.cu's uf_init), background
// holds ~0.  The host then repeats
//   1. ole_scan: each foreground pixel takes the smallest label among its neighbours' labels and,
//      if it is smaller than its own label l, writes it to L[l] (a plain read-min-write, no
//      atomics: a lost update is found again by the next scan) and raises the flag;
//   2. ole_analysis: each foreground pixel follows labels as references to the root (a label
//      that is its own index) and takes it;
// until a scan raises no flag (the host reads the flag after every scan, as the paper does).
// Then every pixel holds the smallest raster index of its component: scipy's key, so
// pixel.cu's marking Compression, renumber.cu's scan and uf_final number them.
//
// Choices where the paper is open: background is ~0 instead of 0 with a padded border (the
// minimum over neighbours then ignores background without a test, and rows need no padding
// column); the 8-neighbourhood is the paper's scheme with the four diagonal labels added (as
// YACCLAB's OLE and the BE paper's FindMinLabel do).
#include "common.cuh"

#define FOR_PIXELS(H, W)                                                                     \
    T x = (T)blockIdx.x * blockDim.x + threadIdx.x;                                          \
    if (x >= W) return;                                                                       \
    for (T y = (T)blockIdx.y * blockDim.y + threadIdx.y; y < H; y += (T)gridDim.y * blockDim.y)

template <typename T, int CONN>
__global__ void ole_scan(T* L, T D, T H, T W, u32* changed) {
    const T BG = (T)~(T)0;
    FOR_PIXELS(H, W) {
        const u64 v = (u64)y * W + x;
        const T l = L[v];
        if (l == BG) continue;
        T m = BG;
        const bool up = y > 0, down = y + 1 < H, left = x > 0, right = x + 1 < W;
        if (up) m = min(m, L[v - W]);
        if (down) m = min(m, L[v + W]);
        if (left) m = min(m, L[v - 1]);
        if (right) m = min(m, L[v + 1]);
        if (CONN == 8) {
            if (up && left) m = min(m, L[v - W - 1]);
            if (up && right) m = min(m, L[v - W + 1]);
            if (down && left) m = min(m, L[v + W - 1]);
            if (down && right) m = min(m, L[v + W + 1]);
        }
        if (m < l) {
            L[(u64)l] = min(L[(u64)l], m);
            *changed = 1;
        }
    }
}

// Analysis: follow labels as references to the root, for every foreground pixel (flat).
template <typename T>
__global__ void ole_analysis(T* L, u64 N) {
    const T BG = (T)~(T)0;
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x) {
        T l = L[v];
        if (l == BG) continue;
        T idx = (T)v;
        while (l != idx) {
            idx = l;
            l = L[(u64)idx];
        }
        L[v] = l;
    }
}
