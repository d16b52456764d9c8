// Renumbering to scipy's numbering, shared by every algorithm, and first voxels of labels.
//
// Every algorithm leaves one root per component whose key is the raster index of the
// component's first voxel, and its marking Compression sets one bit per root at that key in a
// bitmap over voxels.  An exclusive scan of the words' popcounts (prefix[w] = set bits in the
// words before w) then gives each key its rank (common.cuh's rank_of), and the final label is
// rank + 1: no sort, no per-component atomics.  The set bits, in order, are also the first voxels
// of labels 1..n.
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Exclusive scan of the bitmap's popcounts: prefix[w] = number of set bits in words before w.
// Tiles of 256 threads x 8 words.
// ---------------------------------------------------------------------------------------------

#define SCAN_THREADS 256
#define SCAN_WORDS 8
#define SCAN_TILE (SCAN_THREADS * SCAN_WORDS)

template <typename T>
__device__ __forceinline__ T block_exclusive_scan(T v, T& total) {
    // blockDim.x must be a multiple of 32, at most 1024
    __shared__ T warp_sums[32];
    __shared__ T total_s;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    T inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += t;
    }
    if (lane == 31) warp_sums[wid] = inc;
    __syncthreads();
    if (wid == 0) {
        T ws = lane < nw ? warp_sums[lane] : (T)0;
        T wi = ws;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            T t = __shfl_up_sync(0xffffffffu, wi, o);
            if (lane >= o) wi += t;
        }
        if (lane < nw) warp_sums[lane] = wi - ws;
        if (lane == 31) total_s = wi;
    }
    __syncthreads();
    total = total_s;
    T r = warp_sums[wid] + inc - v;
    __syncthreads();
    return r;
}

template <typename T>
__global__ void scan_tile_sums(const u32* __restrict__ bitmap, u64 nwords, T* tile_sums) {
    u64 w0 = (u64)blockIdx.x * SCAN_TILE + (u64)threadIdx.x * SCAN_WORDS;
    T s = 0;
#pragma unroll
    for (int i = 0; i < SCAN_WORDS; i++)
        if (w0 + i < nwords) s += __popc(bitmap[w0 + i]);
    T total;
    block_exclusive_scan<T>(s, total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// One block (blockDim.x a multiple of 32, at most 1024) scans the tile sums in place (exclusive)
// and writes the grand total to tile_sums[ntiles].
template <typename T>
__global__ void scan_tiles(T* tile_sums, u64 ntiles) {
    T carry = 0;
    for (u64 base = 0; base < ntiles; base += blockDim.x) {
        u64 i = base + threadIdx.x;
        T v = i < ntiles ? tile_sums[i] : (T)0;
        T total;
        T ex = block_exclusive_scan<T>(v, total);
        if (i < ntiles) tile_sums[i] = carry + ex;
        carry += total;
    }
    if (threadIdx.x == 0) tile_sums[ntiles] = carry;
}

template <typename T>
__global__ void scan_words(const u32* __restrict__ bitmap, u64 nwords,
                           const T* __restrict__ tile_sums, T* prefix) {
    u64 w0 = (u64)blockIdx.x * SCAN_TILE + (u64)threadIdx.x * SCAN_WORDS;
    u32 c[SCAN_WORDS];
    T s = 0;
#pragma unroll
    for (int i = 0; i < SCAN_WORDS; i++) {
        c[i] = (w0 + i < nwords) ? __popc(bitmap[w0 + i]) : 0;
        s += c[i];
    }
    T total;
    T run = tile_sums[blockIdx.x] + block_exclusive_scan<T>(s, total);
#pragma unroll
    for (int i = 0; i < SCAN_WORDS; i++) {
        if (w0 + i < nwords) prefix[w0 + i] = run;
        run += c[i];
    }
}

// The set bits in order are the first voxels of labels 1..n.
template <typename T>
__global__ void first_from_bitmap(const u32* __restrict__ bitmap, const T* __restrict__ prefix,
                                  u64 nwords, i64* out) {
    for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < nwords;
         w += (u64)gridDim.x * blockDim.x) {
        u32 b = bitmap[w];
        if (!b) continue;
        u64 p = (u64)prefix[w];
        while (b) {
            int i = __ffs(b) - 1;
            b &= b - 1;
            out[p++] = (i64)(w * 32 + i);
        }
    }
}

// First voxel of every label of an already labeled array (when nothing was kept from labeling).
template <typename T>
__global__ void first_from_labels(const T* __restrict__ L, u64 N, u64* out) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x) {
        T l = L[v];
        if (l) atomicMin(&out[(u64)l - 1], v);
    }
}
