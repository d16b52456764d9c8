// BUF and BKE (Allegretti et al., TPDS 2020) on 2x2(x2) blocks, and the Compression and final
// labeling that every block algorithm ends with (BUF, BKE and tile.cu's BKE_TILE).
//
// BUF: Init (every foreground block a root) and Merge (union with every connected backward
// neighbour).  BKE: Init links each block to one neighbour with a smaller id, Compression,
// Reduction (unions with the connected neighbours not linked).  Both then run the marking
// Compression, the scan of renumber.cu and the final labeling.  See blocks.cuh for the forest.
#include "blocks.cuh"

// ---------------------------------------------------------------------------------------------
// BUF
// ---------------------------------------------------------------------------------------------

// Init: every foreground block becomes a root (its slot holds its id); every block stores its
// voxel mask in its information slot (background blocks store 0).
template <typename T, bool IS3D>
__global__ void buf_init(const u8* __restrict__ img, T* L, T* extra, GEO_PARAMS, T BD, T BH,
                         T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        bool hy = y + 1 < g.H, hx = x + 1 < g.W;
        u32 mask = 0;
        if (img[s]) mask |= 1;
        if (hx && img[s + 1]) mask |= 2;
        if (hy && img[s + g.W]) mask |= 4;
        if (hy && hx && img[s + g.W + 1]) mask |= 8;
        if (IS3D && z + 1 < g.D) {
            u64 s1 = s + g.HW;
            if (img[s1]) mask |= 16;
            if (hx && img[s1 + 1]) mask |= 32;
            if (hy && img[s1 + g.W]) mask |= 64;
            if (hy && hx && img[s1 + g.W + 1]) mask |= 128;
        }
        if (mask) L[s] = ((T)s + first_off<T, IS3D>(mask, g)) | tag_bit<T>();
        *info_ptr<T, IS3D>(L, extra, s, z, y, x, g) = (T)mask;
    }
}

// Merge: union with every connected backward neighbour.
template <typename T, bool IS3D, bool ALIGNED>
__global__ void buf_merge(const u8* __restrict__ img, T* L, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u32 hprev, hsame, cand;
        u32 mask = read_nbhd<T, IS3D, ALIGNED>(img, z, y, x, g, hprev, hsame, cand);
        if (!mask) continue;
        u32 conn = conn_bits<IS3D>(hprev, hsame);
        if (!conn) continue;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        unite_neighbours<T, IS3D>(L, s, conn, g);
    }
}

// ---------------------------------------------------------------------------------------------
// BKE
// ---------------------------------------------------------------------------------------------

// In-plane neighbour j = 0..7 of a block: 0..3 backward (row y-1 left to right, then left), 4..7
// forward (right, then row y+1 left to right).
__device__ __forceinline__ constexpr int ip_dy(int j) { return j < 3 ? -1 : (j < 5 ? 0 : 1); }
__device__ __forceinline__ constexpr int ip_dx(int j) {
    return j < 3 ? j - 1 : (j == 3 ? -1 : (j == 4 ? 1 : j - 6));
}

// BKE's choice of parent, as an offset to its slot: the first connected neighbour in plane z-1
// (all its voxels come first), else the first connected neighbour of the same block plane,
// backward or forward, with a voxel before the block's first voxel.  k receives the backward
// neighbour's index (see conn_bits), or -1 for a forward one or none; returns false for none.
template <bool IS3D>
__device__ __forceinline__ bool bke_parent(u32 conn, u32 hsame, u32 cand, int& k, int& dby,
                                           int& dbx, int& dbz) {
    constexpr int kb = IS3D ? 9 : 0;
    dbz = 0;
    if (IS3D && (conn & 0x1FF)) {
        k = __ffs(conn & 0x1FF) - 1;
        dbz = -1;
        dby = k / 3 - 1;
        dbx = k % 3 - 1;
        return true;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        u32 rg = region(ip_dy(j), ip_dx(j));
        if ((hsame & rg) && (cand & rg)) {
            k = j < 4 ? kb + j : -1;
            dby = ip_dy(j);
            dbx = ip_dx(j);
            return true;
        }
    }
    k = -1;
    return false;
}

// Init: link the block to a connected neighbour that surely has a smaller id (one of its visible
// foreground voxels comes before the block's first voxel; forward neighbours of the same block
// plane qualify too, which leaves far fewer roots than backward ones alone), and record the
// connected backward neighbours not linked in the information word for Reduction.
template <typename T, bool IS3D, bool ALIGNED>
__global__ void bke_init(const u8* __restrict__ img, T* L, T* extra, GEO_PARAMS, T BD, T BH,
                         T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u32 hprev, hsame, cand;
        u32 mask = read_nbhd<T, IS3D, ALIGNED>(img, z, y, x, g, hprev, hsame, cand);
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        T* ip = info_ptr<T, IS3D>(L, extra, s, z, y, x, g);
        if (!mask) {
            *ip = 0;
            continue;
        }
        u32 conn = conn_bits<IS3D>(hprev, hsame);
        int k, dby, dbx, dbz;
        bool linked = bke_parent<IS3D>(conn, hsame, cand, k, dby, dbx, dbz);
        if (k >= 0) conn &= ~(1u << k);
        T id = (T)s + first_off<T, IS3D>(mask, g);
        i64 off = 2 * (dbz * (i64)g.HW + dby * (i64)g.W + dbx);
        L[s] = linked ? (T)((i64)s + off) : (id | tag_bit<T>());
        *ip = (T)(mask | (conn << 8));
    }
}

// Reduction: union with the connected neighbours not linked during Init.
template <typename T, bool IS3D>
__global__ void bke_reduce(T* L, T* extra, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        u32 info = (u32)*info_ptr<T, IS3D>(L, extra, s, z, y, x, g);
        u32 conn = info >> 8;
        if (!conn) continue;
        unite_neighbours<T, IS3D>(L, s, conn, g);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared by every block algorithm: compression (plain or inline), marking of roots, final
// labeling.
// ---------------------------------------------------------------------------------------------

// Compression.  Roots keep their tagged id.  Before Reduction a block gets the slot of its root
// (IC: of every ancestor on the way); in the last one (MARK) it gets the root's tagged id, which
// a concurrent Find passing through it reads as the right answer (no unions happen any more), and
// roots set their id's bit in the bitmap.
template <typename T, bool IS3D, bool IC, bool MARK>
__global__ void blk_compress(T* L, T* extra, u32* bitmap, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    const T TAG = tag_bit<T>();
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        u32 mask = (u32)*info_ptr<T, IS3D>(L, extra, s, z, y, x, g) & 0xFF;
        if (!mask) continue;
        T a = L[s];
        if (a & TAG) {
            if (MARK) {
                T id = a & ~TAG;
                atomicOr(&bitmap[(u64)id >> 5], 1u << (id & 31));
            }
            continue;
        }
        T p;
        if (IC) {
            while (!((p = L[(u64)a]) & TAG)) {
                a = p;
                L[s] = a;
            }
        } else {
            while (!((p = L[(u64)a]) & TAG)) a = p;
        }
        L[s] = MARK ? p : a;
    }
}

// Final labeling: every voxel of a foreground block gets its root's rank + 1 (renumber.cu),
// background voxels 0.
template <typename T, bool IS3D>
__global__ void blk_final(T* L, T* extra, const u32* __restrict__ bitmap,
                          const T* __restrict__ prefix, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        T* ip = info_ptr<T, IS3D>(L, extra, s, z, y, x, g);
        u32 mask = (u32)*ip & 0xFF;
        T lab = 0;
        if (mask) lab = rank_of<T>(L[s] & ~tag_bit<T>(), bitmap, prefix);
        bool hy = y + 1 < g.H, hx = x + 1 < g.W;
        L[s] = (mask & 1) ? lab : 0;
        if (hx) L[s + 1] = (mask & 2) ? lab : 0;
        if (hy) L[s + g.W] = (mask & 4) ? lab : 0;
        if (hy && hx) L[s + g.W + 1] = (mask & 8) ? lab : 0;
        if (IS3D && z + 1 < g.D) {
            u64 s1 = s + g.HW;
            L[s1] = (mask & 16) ? lab : 0;
            if (hx) L[s1 + 1] = (mask & 32) ? lab : 0;
            if (hy) L[s1 + g.W] = (mask & 64) ? lab : 0;
            if (hy && hx) L[s1 + g.W + 1] = (mask & 128) ? lab : 0;
        }
    }
}
