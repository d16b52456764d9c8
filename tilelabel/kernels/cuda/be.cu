// BE: Zavalishin et al.'s block equivalence (2016), 2D 8-connectivity on 2x2 blocks and 3D
// 26-connectivity on 2x2x2 blocks: OLE's label equivalence (ole.cu) run on blocks.
//
// Data, as in the paper: a block label map bL (one label per block, its own block index at
// first, ~0 for a background block) and a block connectivity map bC (one bit per neighbour block:
// 8 bits in 2D, 26 in 3D, in raster order of the 3x3(x3) neighbourhood without the centre).
// 1. be_init: the paper's pixel scan mask.  The 4x4 (3D: 4x4x4) window around the block has bit
//    cz*16 + cy*4 + cx (window origin one voxel before the block's corner on every axis); each
//    foreground voxel of the block ORs in the 3x3(x3) mask 0x777 (3D 0x77707770777) shifted to
//    it.  Each neighbour block is then connected when one of its window voxels whose bit is set
//    is foreground; a neighbour's voxels are read until the first foreground one, so every voxel
//    is read at most once.
// 2. The host repeats be_scan (the smallest label among connected neighbour blocks, written to
//    bL[l] without atomics, and the flag) and OLE's analysis on bL until a scan raises no flag.
//    Then every block holds the smallest block index of its component (its root).
// 3. The paper's final labeling copies block labels to voxels.  Its labels are block indices, not
//    scipy's numbering, and the smallest block index is not always the block of the component's
//    first voxel (a block whose only voxels are in its second row comes before a block to its right
//    with a voxel in the first row).  So, tilelabel's renumbering: be_key gives each root the
//    smallest first voxel of its component's blocks (only blocks in the root's block row, 3D block
//    plane, can hold it), tagged in the root's own bL entry (atomicMax of TAG | (TAG - 2 - key));
//    be_mark sets each root's key in the bitmap; renumber.cu's scan; be_final writes the rank.
#include "blocks.cuh"

template <typename T>
__device__ __forceinline__ T amax(T* p, T v);
template <>
__device__ __forceinline__ u32 amax<u32>(u32* p, u32 v) { return atomicMax(p, v); }
template <>
__device__ __forceinline__ u64 amax<u64>(u64* p, u64 v) { return atomicMax(p, v); }

// The connectivity map's type: a byte per block in 2D, 32 bits in 3D (as in the paper).
template <bool IS3D>
struct ConnT {
    typedef u8 type;
};
template <>
struct ConnT<true> {
    typedef u32 type;
};

// Neighbour k of a block (k = 0..7 in 2D, 0..25 in 3D: raster order without the centre).
template <bool IS3D>
__device__ __forceinline__ constexpr int nb_cell(int k) {
    return IS3D ? (k < 13 ? k : k + 1) : (k < 4 ? k : k + 1);
}
template <bool IS3D>
__device__ __forceinline__ constexpr int nb_dz(int k) {
    return IS3D ? nb_cell<IS3D>(k) / 9 - 1 : 0;
}
template <bool IS3D>
__device__ __forceinline__ constexpr int nb_dy(int k) {
    return nb_cell<IS3D>(k) / 3 % 3 - 1;
}
template <bool IS3D>
__device__ __forceinline__ constexpr int nb_dx(int k) {
    return nb_cell<IS3D>(k) % 3 - 1;
}

// Window bits of neighbour k: per axis, offset -1 is window coordinate 0, offset 0 is 1 and 2
// (the block's own), offset +1 is 3; 2D windows lie in cz = 0.
__device__ __forceinline__ constexpr u32 axis_cells(int d) { return d < 0 ? 1u : (d == 0 ? 6u : 8u); }
template <bool IS3D>
__device__ __forceinline__ constexpr u64 nb_region(int k) {
    u64 r = 0;
    const u32 zs = IS3D ? axis_cells(nb_dz<IS3D>(k)) : 1u;
    const u32 ys = axis_cells(nb_dy<IS3D>(k)), xs = axis_cells(nb_dx<IS3D>(k));
    for (int cz = 0; cz < 4; cz++)
        for (int cy = 0; cy < 4; cy++)
            for (int cx = 0; cx < 4; cx++)
                if (((zs >> cz) & 1) && ((ys >> cy) & 1) && ((xs >> cx) & 1))
                    r |= 1ull << (cz * 16 + cy * 4 + cx);
    return r;
}

#define BLOCK_INDEX (((u64)bz * BH + by) * (u64)BW + bx)

// Voxel mask of a block (bit dz*4 + dy*2 + dx) and its flags of in-range sides.
template <typename T, bool IS3D>
__device__ __forceinline__ u32 block_mask(const u8* __restrict__ img, u64 s, T z, T y, T x,
                                          const Geo<T>& g) {
    const bool hx = x + 1 < g.W, hy = y + 1 < g.H, hz = IS3D && z + 1 < g.D;
    u32 m = 0;
    if (img[s]) m |= 1;
    if (hx && img[s + 1]) m |= 2;
    if (hy && img[s + g.W]) m |= 4;
    if (hy && hx && img[s + g.W + 1]) m |= 8;
    if (hz) {
        const u64 s1 = s + g.HW;
        if (img[s1]) m |= 16;
        if (hx && img[s1 + 1]) m |= 32;
        if (hy && img[s1 + g.W]) m |= 64;
        if (hy && hx && img[s1 + g.W + 1]) m |= 128;
    }
    return m;
}

// Initialization: block labels and the connectivity map through the pixel scan mask.
template <typename T, bool IS3D>
__global__ void be_init(const u8* __restrict__ img, T* bL, typename ConnT<IS3D>::type* bC,
                        GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    constexpr u64 P0 = IS3D ? 0x77707770777ull : 0x777ull;
    FOR_BLOCKS(BD, BH, BW) {
        const T z = 2 * bz, y = 2 * by, x = 2 * bx;
        const u64 s = (u64)z * g.HW + (u64)y * g.W + x, b = BLOCK_INDEX;
        const u32 m = block_mask<T, IS3D>(img, s, z, y, x, g);
        if (!m) {
            bL[b] = (T)~(T)0;
            bC[b] = 0;
            continue;
        }
        u64 P = 0;
#pragma unroll
        for (int j = 0; j < (IS3D ? 8 : 4); j++)
            if ((m >> j) & 1) P |= P0 << ((j >> 2) * 16 + ((j >> 1) & 1) * 4 + (j & 1));
        // window cells outside the volume
        const u32 vx = (x > 0 ? 1u : 0u) | 2u | (x + 1 < g.W ? 4u : 0u) | (x + 2 < g.W ? 8u : 0u);
        const u32 vy = (y > 0 ? 1u : 0u) | 2u | (y + 1 < g.H ? 4u : 0u) | (y + 2 < g.H ? 8u : 0u);
        const u32 vz = IS3D ? ((z > 0 ? 1u : 0u) | 2u | (z + 1 < g.D ? 4u : 0u) |
                               (z + 2 < g.D ? 8u : 0u))
                            : 1u;
        u64 valid = 0;
        for (int cz = 0; cz < 4; cz++)
            if ((vz >> cz) & 1)
                for (int cy = 0; cy < 4; cy++)
                    if ((vy >> cy) & 1) valid |= (u64)vx << (cz * 16 + cy * 4);
        P &= valid;
        u32 conn = 0;
#pragma unroll
        for (int k = 0; k < (IS3D ? 26 : 8); k++) {
            u64 bits = P & nb_region<IS3D>(k);
            while (bits) {
                const int q = __ffsll((long long)bits) - 1;
                bits &= bits - 1;
                const i64 off = (IS3D ? ((q >> 4) - 1) * (i64)g.HW : 0) +
                                (((q >> 2) & 3) - 1) * (i64)g.W + ((q & 3) - 1);
                if (img[(u64)((i64)s + off)]) {
                    conn |= 1u << k;
                    break;
                }
            }
        }
        bL[b] = (T)b;
        bC[b] = (typename ConnT<IS3D>::type)conn;
    }
}

// Scanning: the smallest label of the connected neighbour blocks, written to the entry that the
// block's label names.
template <typename T, bool IS3D>
__global__ void be_scan(T* bL, const typename ConnT<IS3D>::type* __restrict__ bC, T BD, T BH,
                        T BW, u32* changed) {
    const T BG = (T)~(T)0;
    FOR_BLOCKS(BD, BH, BW) {
        const u64 b = BLOCK_INDEX;
        const T l = bL[b];
        if (l == BG) continue;
        const u32 c = bC[b];
        T m = l;
#pragma unroll
        for (int k = 0; k < (IS3D ? 26 : 8); k++)
            if ((c >> k) & 1) {
                const i64 off = (nb_dz<IS3D>(k) * (i64)BH + nb_dy<IS3D>(k)) * (i64)BW +
                                nb_dx<IS3D>(k);
                m = min(m, bL[(u64)((i64)b + off)]);
            }
        if (m < l) {
            bL[(u64)l] = min(bL[(u64)l], m);
            *changed = 1;
        }
    }
}

// Key: each root's entry gets TAG | (TAG - 2 - key), key the smallest first voxel of its blocks.
template <typename T, bool IS3D>
__global__ void be_key(const u8* __restrict__ img, T* bL, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    const T BG = (T)~(T)0, TAG = tag_bit<T>();
    FOR_BLOCKS(BD, BH, BW) {
        const u64 b = BLOCK_INDEX;
        const T e = bL[b];
        if (e == BG) continue;
        const u64 r = (e & TAG) ? b : (u64)e;  // a root's entry may be tagged already
        const u64 first = IS3D ? (u64)bz * BH * BW : ((u64)bz * BH + by) * BW;
        if (r < first) continue;  // root in an earlier block row (plane): its voxels come first
        const T z = 2 * bz, y = 2 * by, x = 2 * bx;
        const u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        const u32 m = block_mask<T, IS3D>(img, s, z, y, x, g);
        const T key = (T)s + first_off<T, IS3D>(m, g);
        const T enc = TAG | (T)(TAG - 2 - key);
        const T cur = bL[r];
        if ((cur & TAG) && cur >= enc) continue;
        amax<T>(&bL[r], enc);
    }
}

__device__ __forceinline__ void set_bit(u32* bitmap, u64 k) {
    atomicOr(&bitmap[k >> 5], 1u << (k & 31));
}

// Roots (tagged entries) set their key's bit.
template <typename T>
__global__ void be_mark(const T* __restrict__ bL, u32* bitmap, u64 nblocks) {
    const T BG = (T)~(T)0, TAG = tag_bit<T>();
    for (u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x; b < nblocks;
         b += (u64)gridDim.x * blockDim.x) {
        const T e = bL[b];
        if (e != BG && (e & TAG)) set_bit(bitmap, (u64)(T)(TAG - 2 - (e & ~TAG)));
    }
}

// Final labeling: each voxel of a block gets its root's rank + 1, background 0.
template <typename T, bool IS3D>
__global__ void be_final(const u8* __restrict__ img, T* L, const T* __restrict__ bL,
                         const u32* __restrict__ bitmap, const T* __restrict__ prefix, GEO_PARAMS,
                         T BD, T BH, T BW) {
    GEO_MAKE
    const T BG = (T)~(T)0, TAG = tag_bit<T>();
    FOR_BLOCKS(BD, BH, BW) {
        const u64 b = BLOCK_INDEX;
        T e = bL[b];
        T lab = 0;
        if (e != BG) {
            if (!(e & TAG)) e = bL[(u64)e];
            lab = rank_of<T>((T)(TAG - 2 - (e & ~TAG)), bitmap, prefix);
        }
        const T z = 2 * bz, y = 2 * by, x = 2 * bx;
        const u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        const bool hx = x + 1 < g.W, hy = y + 1 < g.H;
        L[s] = img[s] ? lab : 0;
        if (hx) L[s + 1] = img[s + 1] ? lab : 0;
        if (hy) L[s + g.W] = img[s + g.W] ? lab : 0;
        if (hy && hx) L[s + g.W + 1] = img[s + g.W + 1] ? lab : 0;
        if (IS3D && z + 1 < g.D) {
            const u64 s1 = s + g.HW;
            L[s1] = img[s1] ? lab : 0;
            if (hx) L[s1 + 1] = img[s1 + 1] ? lab : 0;
            if (hy) L[s1 + g.W] = img[s1 + g.W] ? lab : 0;
            if (hy && hx) L[s1 + g.W + 1] = img[s1 + g.W + 1] ? lab : 0;
        }
    }
}
