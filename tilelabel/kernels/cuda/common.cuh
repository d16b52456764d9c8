// Types and helpers shared by every kernel family (block.cu, tile.cu, pixel.cu, renumber.cu).
//
// The sources ship compiled by nvcc (scripts/build_kernels.py) and are compiled at run time
// through cupy.RawModule (NVRTC) where no shipped binary matches, so no standard header is
// included.  tilelabel.kernels.cuda.compile replaces each `#include "x.cuh"` line by the
// header's text first, so that a binary's digest and CuPy's cache key cover every line compiled.
//
// Every kernel is templated on the label type T (unsigned int or unsigned long long).  Voxel
// indices are held in T and address arithmetic is done in 64 bits, so volumes past 2^31 and 2^32
// voxels work (T = uint64 above 2^32 - 1 voxels; the Python side picks it).
#ifndef TILELABEL_COMMON_CUH
#define TILELABEL_COMMON_CUH

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

template <typename T>
__device__ __forceinline__ T amin(T* p, T v);
template <>
__device__ __forceinline__ u32 amin<u32>(u32* p, u32 v) { return atomicMin(p, v); }
template <>
__device__ __forceinline__ u64 amin<u64>(u64* p, u64 v) { return atomicMin(p, v); }

// Final label of the component whose key (raster index of its first voxel) is k: roots set the
// bit of their key in a bitmap over voxels, prefix[w] counts the set bits of the words before w
// (renumber.cu), so rank(k) = prefix[k/32] + set bits below k in its word.
template <typename T>
__device__ __forceinline__ T rank_of(T k, const u32* __restrict__ bitmap,
                                     const T* __restrict__ prefix) {
    u64 w = (u64)k >> 5;
    return prefix[w] + (T)__popc(bitmap[w] & ((1u << (k & 31)) - 1u)) + 1;
}

#endif  // TILELABEL_COMMON_CUH
