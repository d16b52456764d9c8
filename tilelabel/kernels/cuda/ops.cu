// Small array operations on a run's critical path, as tilelabel's own kernels rather than CuPy's
// elementwise ones, so that they ship compiled with the rest (tilelabel.kernels.cuda.shipped):
// a CuPy kernel compiles through NVRTC in every fresh process.
//
// Every kernel is a grid-stride loop with 64-bit indices (CuPy's packbits indexes with int).
#include "common.cuh"

#define GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// 0/1 voxels packed 8 to a byte in numpy's bit order (first voxel in the high bit), so that
// host and device packs are interchangeable.
__global__ void pack_bits(const u8* __restrict__ fg, i64 size, u8* __restrict__ packed) {
    GRID_STRIDE(i, (size + 7) / 8) {
        u8 b = 0;
        i64 k = i * 8;
        for (int j = 0; j < 8 && k + j < size; ++j) b |= (u8)((fg[k + j] != 0) << (7 - j));
        packed[i] = b;
    }
}

__global__ void unpack_bits(const u8* __restrict__ packed, i64 size, u8* __restrict__ fg) {
    GRID_STRIDE(i, size) fg[i] = (packed[i >> 3] >> (7 - (i & 7))) & 1;
}

// p[0..n) = v
template <typename T>
__global__ void fill(T* __restrict__ p, i64 n, T v) {
    GRID_STRIDE(i, n) p[i] = v;
}

// out[i] = lut[labels[i]]: a chunk's labels mapped to their final labels
template <typename L, typename O>
__global__ void lut_take(const L* __restrict__ labels, i64 n, const O* __restrict__ lut,
                         O* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = lut[labels[i]];
}

// out[i] = values[i] where keep[labels[i]], else 0: a segmentation's values without the
// components the table drops (dust); values moved as unsigned words of their width
template <typename L, typename W>
__global__ void keep_values(const W* __restrict__ values, const L* __restrict__ labels, i64 n,
                            const u8* __restrict__ keep, W* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = keep[labels[i]] ? values[i] : (W)0;
}

// out[i] = values[index[i]]
template <typename V>
__global__ void gather(const V* __restrict__ values, const i64* __restrict__ index, i64 n,
                       V* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = values[index[i]];
}

// 0/1 foreground of any value type: nonzero is foreground
template <typename V>
__global__ void nonzero(const V* __restrict__ values, i64 n, u8* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = values[i] != (V)0;
}

// A C-ordered copy of a view of up to 4 axes: element strides s0..s3 over extents n0..n3
// (unused leading axes have extent 1), as a face of a chunk is.
template <typename W>
__global__ void strided_copy(const W* __restrict__ src, i64 n0, i64 n1, i64 n2, i64 n3, i64 s0,
                             i64 s1, i64 s2, i64 s3, W* __restrict__ dst) {
    GRID_STRIDE(i, n0 * n1 * n2 * n3) {
        i64 r = i, i3 = r % n3;
        r /= n3;
        i64 i2 = r % n2;
        r /= n2;
        i64 i1 = r % n1, i0 = r / n1;
        dst[i] = src[i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3];
    }
}

// Storage tiles of a block (D, H, W; C order): tile k of the block's tile grid (GD, GH, GW),
// of shape (TD, TH, TW), goes to dst[k * stride ...] in C order, zero past the block's edge and
// in the stride's padding; stride (elements) >= TD * TH * TW.
template <typename W>
__global__ void tiles_gather(const W* __restrict__ src, i64 D, i64 H, i64 Wd, i64 TD, i64 TH,
                             i64 TW, i64 GH, i64 GW, i64 ntiles, i64 stride, W* __restrict__ dst) {
    i64 per = TD * TH * TW;
    GRID_STRIDE(i, ntiles * stride) {
        i64 k = i / stride, j = i % stride;
        W v = 0;
        if (j < per) {
            i64 z = (k / (GH * GW)) * TD + j / (TH * TW);
            i64 y = (k / GW % GH) * TH + j / TW % TH;
            i64 x = (k % GW) * TW + j % TW;
            if (z < D && y < H && x < Wd) v = src[(z * H + y) * Wd + x];
        }
        dst[i] = v;
    }
}

// The inverse: the tiles index[0..n) of the tile grid, at src[t * stride ...], written into
// the block, less what lies past its edge.
template <typename W>
__global__ void tiles_scatter(const W* __restrict__ src, const i64* __restrict__ index, i64 n,
                              i64 stride, i64 D, i64 H, i64 Wd, i64 TD, i64 TH, i64 TW, i64 GH,
                              i64 GW, W* __restrict__ dst) {
    i64 per = TD * TH * TW;
    GRID_STRIDE(i, n * per) {
        i64 t = i / per, j = i % per, k = index[t];
        i64 z = (k / (GH * GW)) * TD + j / (TH * TW);
        i64 y = (k / GW % GH) * TH + j / TW % TH;
        i64 x = (k % GW) * TW + j % TW;
        if (z < D && y < H && x < Wd) dst[(z * H + y) * Wd + x] = src[t * stride + j];
    }
}

// Frames of sizes[k] bytes at src + k * stride, packed one after another at dst + offsets[k]:
// a block per frame.
__global__ void pack_frames(const u8* __restrict__ src, i64 stride, const u64* __restrict__ sizes,
                            const i64* __restrict__ offsets, u8* __restrict__ dst) {
    i64 k = blockIdx.x;
    const u8* from = src + k * stride;
    u8* to = dst + offsets[k];
    for (i64 i = threadIdx.x; i < (i64)sizes[k]; i += blockDim.x) to[i] = from[i];
}

// The checksum of tilelabel.kernels.cpu.fingerprint, the same number: word i of the bytes
// (little-endian, the last padded with zeros) adds splitmix64(word + (i + 1) * golden) to a sum
// modulo 2^64. Each warp sums its words, its first lane adds them to the block's, the block's
// first thread to *out (zeroed by the caller).
__device__ __forceinline__ u64 splitmix(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__global__ void fingerprint(const u8* __restrict__ bytes, i64 size, u64* __restrict__ out) {
    __shared__ u64 block_sum;
    if (threadIdx.x == 0) block_sum = 0;
    __syncthreads();
    const i64 whole = size / 8, words = whole + (size % 8 != 0);
    const u64* w = (const u64*)bytes;
    u64 h = 0;
    GRID_STRIDE(i, words) {
        u64 v = 0;
        if (i < whole) {
            v = w[i];
        } else {
            for (i64 b = whole * 8; b < size; ++b) v |= (u64)bytes[b] << (8 * (b - whole * 8));
        }
        h += splitmix(v + (u64)(i + 1) * 0x9E3779B97F4A7C15ULL);
    }
    for (int off = 16; off > 0; off >>= 1) h += __shfl_down_sync(0xffffffffu, h, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(&block_sum, h);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, block_sum);
}
