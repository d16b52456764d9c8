// HA4: Hennequin et al.'s hybrid pixel / segment direct labeling (CCL) and analysis (CCA) for 2D
// 4-connectivity, with warp intrinsics.
//
// A warp takes 32 consecutive pixels of a row; __ballot_sync gives their bitmask, and
// start_distance / end_distance (the paper's Algorithm 1) give each pixel the distance to its
// segment's start and a start the length of its segment within the word.  Only segment starts
// (and the first pixel of a word, which starts the word's piece of a segment) are nodes of the
// equivalence forest, held in the label array at their raster index.
// 1. ha4_strip (Algorithm 3): a CUDA block of 32 x HA4_H threads takes a strip of HA4_H rows, a
//    warp per row, walking the row 32 pixels at a time; starts get their own index (a word's
//    first pixel continuing a segment of the word before gets that segment's start), and a pixel
//    where the row's or the row above's segment starts merges the two (Algorithm 2, Playne's
//    merge with atomicMin).  Rows exchange bitmasks through shared memory.
// 2. ha4_border (Algorithm 4): the same merges across the rows where strips meet.
// 3. ha4_mark: each start finds its root (the component's first pixel: merges link larger
//    indices to smaller) and points to it; roots set their bit in the bitmap.
// Then renumber.cu's scan, and
// 4. ha4_relabel (Algorithm 5): a start takes its root's rank + 1 and hands it to its segment
//    with __shfl_sync; or ha4_analysis (Algorithm 6), which does the same and adds the segment's
//    size, coordinate sums and extent to its label's features with atomics.
//
// Choices where the paper is open: images of any width (lanes past the row's end are background;
// the paper assumes widths of whole warps); a second shared buffer of bitmasks so that one
// __syncthreads per word keeps a warp from overwriting a mask another warp still reads; the
// paper's one pixel per thread (its Section IV-E variant of two pixels per thread is not done);
// the smallest row of a component is its first pixel's (the paper's remark), so the analysis
// does no atomicMin for it.
#include "common.cuh"

#define HA4_H 4
#define FULL 0xffffffffu

// Distance from pixel `tx` to the start of its segment (0 for a start; 0 at tx = 0).
__device__ __forceinline__ int start_distance(u32 pixels, int tx) {
    return tx == 0 ? 0 : __clz(~(pixels << (32 - tx)));
}

// Length of the segment (within the word) that starts at pixel `tx`.
__device__ __forceinline__ int end_distance(u32 pixels, int tx) {
    return tx == 31 ? 1 : __ffs(~(pixels >> (tx + 1)));
}

// Algorithm 2: union of the trees of a and b, linking the larger root to the smaller.
template <typename T>
__device__ __forceinline__ void merge(T* L, T a, T b) {
    while (a != b && a != L[(u64)a]) a = L[(u64)a];
    while (a != b && b != L[(u64)b]) b = L[(u64)b];
    while (a != b) {
        if (a < b) {
            const T t = a;
            a = b;
            b = t;
        }
        const T c = amin<T>(&L[(u64)a], b);
        a = (a == c) ? b : c;
    }
}

template <typename T>
__global__ void __launch_bounds__(32 * HA4_H) ha4_strip(const u8* __restrict__ img, T* L, T H, T W) {
    __shared__ u32 rows[2][HA4_H];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const u64 nstrips = ((u64)H + HA4_H - 1) / HA4_H;
    for (u64 strip = blockIdx.x; strip < nstrips; strip += gridDim.x) {
        const u64 y = strip * HA4_H + ty;
        const bool in = y < H;
        u64 dist = 0, dist_up = 0;  // length of the run ending the words before, this row / above
        int buf = 0;
        for (u64 i = 0; i < (u64)W; i += 32, buf ^= 1) {
            const u64 x = i + tx, k = y * W + x;
            const bool p = in && x < W && img[k];
            const u32 pix = __ballot_sync(FULL, p);
            u64 sd = start_distance(pix, tx);
            if (p && sd == 0) L[k] = (T)(tx == 0 ? k - dist : k);
            if (tx == 0) rows[buf][ty] = pix;
            __syncthreads();
            const u32 up = ty > 0 ? rows[buf][ty - 1] : 0u;
            const bool pu = (up >> tx) & 1;
            u64 sdu = start_distance(up, tx);
            if (tx == 0) {
                sd = dist;
                sdu = dist_up;
            }
            if (p && pu && (sd == 0 || sdu == 0)) merge<T>(L, (T)(k - sd), (T)(k - W - sdu));
            u32 d = __clz(~up);
            dist_up = d + (d == 32 ? dist_up : 0);
            d = __clz(~pix);
            dist = d + (d == 32 ? dist : 0);
        }
        __syncthreads();  // the next strip writes rows[0] again
    }
}

// A warp per 32-pixel word of the rows given: word w of `nw` per row; `row_of(w / nw)` is its row.
#define FOR_WORDS(NWORDS)                                                                    \
    const int lane = threadIdx.x & 31;                                                        \
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;                       \
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;                                    \
    for (u64 w = warp; w < (NWORDS); w += nwarps)

// Algorithm 4: merges across the first row of every strip but the first.
template <typename T>
__global__ void ha4_border(const u8* __restrict__ img, T* L, T H, T W) {
    const u64 nw = ((u64)W + 31) / 32, nb = ((u64)H + HA4_H - 1) / HA4_H - 1;
    FOR_WORDS(nb * nw) {
        const u64 y = (w / nw + 1) * HA4_H, x = (w % nw) * 32 + lane, k = y * W + x;
        const bool p = x < W && img[k], pu = x < W && img[k - W];
        const u32 pix = __ballot_sync(FULL, p), up = __ballot_sync(FULL, pu);
        if (p && pu) {
            const int sd = start_distance(pix, lane), sdu = start_distance(up, lane);
            if (sd == 0 || sdu == 0) merge<T>(L, (T)(k - sd), (T)(k - W - sdu));
        }
    }
}

// Each start points to its root; roots set their bit (the bitmap is zeroed).
template <typename T>
__global__ void ha4_mark(const u8* __restrict__ img, T* L, u32* bitmap, T H, T W) {
    const u64 nw = ((u64)W + 31) / 32;
    FOR_WORDS((u64)H * nw) {
        const u64 y = w / nw, x = (w % nw) * 32 + lane, k = y * W + x;
        const bool p = x < W && img[k];
        const u32 pix = __ballot_sync(FULL, p);
        if (p && start_distance(pix, lane) == 0) {
            const T a = L[k];
            T r = a, q;
            while ((q = L[(u64)r]) != r) r = q;
            if ((u64)r == k)
                atomicOr(&bitmap[k >> 5], 1u << (k & 31));
            else if (r != a)
                L[k] = r;
        }
    }
}

// Algorithm 5 with scipy's numbering: a start reads its root, takes its rank + 1 and hands it on.
template <typename T>
__global__ void ha4_relabel(const u8* __restrict__ img, T* L, const u32* __restrict__ bitmap,
                            const T* __restrict__ prefix, T H, T W) {
    const u64 nw = ((u64)W + 31) / 32;
    FOR_WORDS((u64)H * nw) {
        const u64 y = w / nw, x = (w % nw) * 32 + lane, k = y * W + x;
        const bool p = x < W && img[k];
        const u32 pix = __ballot_sync(FULL, p);
        const int sd = start_distance(pix, lane);
        T lab = 0;
        if (p && sd == 0) lab = rank_of<T>(L[k], bitmap, prefix);
        lab = __shfl_sync(FULL, lab, lane - sd);
        if (x < W) L[k] = p ? lab : (T)0;
    }
}

// Algorithm 6 fused with the relabeling: the features of label l at index l - 1 of count,
// sums (rows y, x), lo (x only: a component's smallest row is its first pixel's) and hi (y, x).
template <typename T>
__global__ void ha4_analysis(const u8* __restrict__ img, T* L, const u32* __restrict__ bitmap,
                             const T* __restrict__ prefix, T H, T W, u64 n, u64* count, u64* sums,
                             int* lo_x, int* hi) {
    const u64 nw = ((u64)W + 31) / 32;
    FOR_WORDS((u64)H * nw) {
        const u64 y = w / nw, x = (w % nw) * 32 + lane, k = y * W + x;
        const bool p = x < W && img[k];
        const u32 pix = __ballot_sync(FULL, p);
        const int sd = start_distance(pix, lane);
        T lab = 0;
        if (p && sd == 0) {
            lab = rank_of<T>(L[k], bitmap, prefix);
            const u64 i = (u64)lab - 1, c = end_distance(pix, lane);
            atomicAdd(&count[i], c);
            atomicAdd(&sums[i], y * c);
            atomicAdd(&sums[n + i], (2 * x + c - 1) * c / 2);
            atomicMin(&lo_x[i], (int)x);
            atomicMax(&hi[i], (int)y);
            atomicMax(&hi[n + i], (int)(x + c - 1));
        }
        lab = __shfl_sync(FULL, lab, lane - sd);
        if (x < W) L[k] = p ? lab : (T)0;
    }
}
