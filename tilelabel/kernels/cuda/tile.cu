// BKE_TILE: BKE's 2x2(x2) blocks with a tile-local union-find in shared memory, then global
// unions across tile faces only (the tile merging of Oliveira & Lotufo and of Playne & Hawick's
// HA4).  The labeling then ends as every block algorithm does: block.cu's marking Compression,
// renumber.cu's scan, block.cu's final labeling.
//
// A CUDA block takes a tile of 32 x TY x TZ blocks (TZ = 1 in 2D); NT rows of 32 threads walk its
// rows.  Phase 1 reads each block's neighbourhood (read_nbhd), writes its information word (voxel
// mask | connected backward neighbours *outside* the tile << 8) and keeps the connected backward
// neighbours inside the tile in shared memory.  Phase 2 unites the blocks of the tile in a shared-
// memory forest with the same atomicMin union as the global one: a node holds the tile-local
// index of an ancestor, or for a root its *local key* (the raster index of its first voxel within
// the tile's box of voxels) with the top bit set.  Lexicographic (z, y, x) order inside a box is
// the global raster order, so union by smaller key makes each tile component's root the block
// holding its first voxel, as in the global forest.  Phase 3 writes the global forest: a tile root
// gets its tagged global id, every other block the slot of its tile root (depth 1, no
// Compression needed).  Reduction (tile_reduce) then unites only the blocks on tile faces with
// their outside neighbours (global atomicMin unions by id, as in BKE): roots of the final forest
// are again the blocks holding each component's first voxel, so the renumbering is unchanged.
//
// Larger tiles leave fewer face blocks for the global Reduction; the Python side launches
// 32 x 16 x 16 blocks in 3D (the u32 forest and u16 neighbour bits fill 48 KB of static shared
// memory) and 32 x 32 in 2D.
#include "blocks.cuh"

#define TILE_X 32
#define LTAG 0x80000000u
#define LBG 0xFFFFFFFFu  // background (or outside the volume) in the shared forest

// Find with path halving (each node on the way skips to its grandparent).  The plain store is
// safe against concurrent unions: the node is no root, so a thread's atomicMin on it returns a
// pointer and that thread unites its own root with that old parent next (see bunion), and both
// values stored point to an ancestor of smaller key (no cycles).  Halving keeps the trees of
// dense tiles shallow: without it they grow chains hundreds of blocks long.
__device__ __forceinline__ u32 lfind(u32* P, u32 a, u32& f) {
    volatile u32* V = P;
    u32 p = V[a];
    while (!(p & LTAG)) {
        u32 q = V[p];
        if (q & LTAG) {
            f = q & ~LTAG;
            return p;
        }
        V[a] = q;
        a = q;
        p = V[a];
    }
    f = p & ~LTAG;
    return a;
}

__device__ __forceinline__ void lunion(u32* P, u32 a, u32 b) {
    while (true) {
        u32 fa, fb;
        a = lfind(P, a, fa);
        b = lfind(P, b, fb);
        if (a == b) return;
        if (fa < fb) {
            u32 old = atomicMin(&P[b], a);
            if (old == (fb | LTAG)) return;
            b = old;
        } else {
            u32 old = atomicMin(&P[a], b);
            if (old == (fa | LTAG)) return;
            a = old;
        }
    }
}

// Backward neighbour k (conn_bits order) as block offsets.
template <bool IS3D>
__device__ __forceinline__ void nb_delta(int k, int& dbz, int& dby, int& dbx) {
    if (IS3D) {
        dbz = k < 9 ? -1 : 0;
        dby = k < 9 ? k / 3 - 1 : (k < 12 ? -1 : 0);
        dbx = k < 9 ? k % 3 - 1 : (k < 12 ? k - 10 : -1);
    } else {
        dbz = 0;
        dby = k < 3 ? -1 : 0;
        dbx = k < 3 ? k - 1 : -1;
    }
}

// conn bits whose neighbour lies outside the tile, for a block at tile position (tz, ty, tx).
template <bool IS3D, int TY>
__device__ __forceinline__ u32 outside_bits(int tz, int ty, int tx) {
    u32 o = 0;
    if (IS3D) {
        if (tz == 0) o |= 0x1FFu;                 // plane z-1
        if (ty == 0) o |= 0x007u | 0xE00u;        // row y-1 of planes z-1 and z
        if (ty == TY - 1) o |= 0x1C0u;            // row y+1 of plane z-1
        if (tx == 0) o |= 0x1249u;                // column x-1 (k = 0, 3, 6, 9, 12)
        if (tx == TILE_X - 1) o |= 0x924u;        // column x+1 (k = 2, 5, 8, 11)
    } else {
        if (ty == 0) o |= 0x7u;
        if (tx == 0) o |= 0x9u;
        if (tx == TILE_X - 1) o |= 0x4u;
    }
    return o;
}

// Phase 1 for the block at tile row r (r = tz * TY + ty), column tx.
template <typename T, bool IS3D, bool ALIGNED, int TY>
__device__ __forceinline__ void tile_read(const u8* __restrict__ img, T* L, T* extra,
                                          const Geo<T>& g, T BD, T BH, T BW, T bz0, T by0,
                                          T bx0, int r, int tx, u32* par,
                                          unsigned short* cin) {
    int tz = r / TY, ty = r % TY;
    int li = r * TILE_X + tx;
    T bz = bz0 + tz, by = by0 + ty, bx = bx0 + tx;
    par[li] = LBG;
    cin[li] = 0;
    if (bz >= BD || by >= BH || bx >= BW) return;
    T z = 2 * bz, y = 2 * by, x = 2 * bx;
    u32 hprev, hsame, cand;
    u32 mask = read_nbhd<T, IS3D, ALIGNED>(img, z, y, x, g, hprev, hsame, cand);
    u64 s = (u64)z * g.HW + (u64)y * g.W + x;
    T* ip = info_ptr<T, IS3D>(L, extra, s, z, y, x, g);
    if (!mask) {
        *ip = 0;
        return;
    }
    u32 conn = conn_bits<IS3D>(hprev, hsame);
    u32 out = outside_bits<IS3D, TY>(tz, ty, tx);
    *ip = (T)(mask | ((conn & out) << 8));
    cin[li] = (unsigned short)(conn & ~out);
    u32 j = __ffs(mask) - 1;
    u32 lz = 2 * tz + (j >> 2), ly = 2 * ty + ((j >> 1) & 1), lx = 2 * tx + (j & 1);
    par[li] = LTAG | ((lz * (2 * TY) + ly) * (2 * TILE_X) + lx);
}

// Phase 2: unions with the connected backward neighbours inside the tile.
template <bool IS3D, int TY>
__device__ __forceinline__ void tile_unite(int r, int tx, u32* par, const unsigned short* cin) {
    int li = r * TILE_X + tx;
    u32 c = cin[li];
    while (c) {
        int k = __ffs(c) - 1;
        c &= c - 1;
        int dbz, dby, dbx;
        nb_delta<IS3D>(k, dbz, dby, dbx);
        int nl = li + (dbz * TY + dby) * TILE_X + dbx;
        lunion(par, (u32)li, (u32)nl);
    }
}

// Phase 3: the global forest entry of the block (its tile root's slot, or its tagged id).
template <typename T, bool IS3D, int TY>
__device__ __forceinline__ void tile_write(T* L, const Geo<T>& g, T bz0, T by0, T bx0, int r,
                                           int tx, u32* par) {
    int li = r * TILE_X + tx;
    if (par[li] == LBG) return;
    int tz = r / TY, ty = r % TY;
    u64 o = 2 * ((u64)bz0 * g.HW + (u64)by0 * g.W + (u64)bx0);  // the tile's first voxel
    u64 s = o + 2 * ((u64)tz * g.HW + (u64)ty * g.W + (u64)tx);
    u32 f;
    u32 a = lfind(par, (u32)li, f);
    if (a == (u32)li) {
        u32 lx = f % (2 * TILE_X), q = f / (2 * TILE_X);
        u32 ly = q % (2 * TY), lz = q / (2 * TY);
        T id = (T)(o + (u64)lz * g.HW + (u64)ly * g.W + lx);
        L[s] = id | tag_bit<T>();
    } else {
        par[li] = a;  // no unions any more: a shortcut any concurrent Find may take
        u32 ax = a % TILE_X, ar = a / TILE_X;
        u32 ay = ar % TY, az = ar / TY;
        L[s] = (T)(o + 2 * ((u64)az * g.HW + (u64)ay * g.W + ax));
    }
}

// Tile pass: CUDA block (32, NT); grid (tiles in x, min(tiles in y, 65535), min(tiles in z,
// 65535)), grid-stride over tiles in y and z.
template <typename T, bool IS3D, bool ALIGNED, int TY, int TZ, int NT>
__global__ void __launch_bounds__(TILE_X * NT) bke_tile(const u8* __restrict__ img, T* L,
                                                        T* extra, GEO_PARAMS, T BD, T BH, T BW) {
    static_assert((TY & (TY - 1)) == 0 && (TZ & (TZ - 1)) == 0, "tile sides: powers of two");
    static_assert(IS3D || TZ == 1, "2D tiles have TZ = 1");
    static_assert(256 * TY * TZ <= 0x80000000u, "local keys below the tag bit");
    constexpr int R = TY * TZ;
    __shared__ u32 par[R * TILE_X];
    __shared__ unsigned short cin[R * TILE_X];
    GEO_MAKE
    const int tx = threadIdx.x;
    const T bx0 = (T)blockIdx.x * TILE_X;
    const T NTY = (BH + TY - 1) / TY, NTZ = (BD + TZ - 1) / TZ;
    for (T tzi = blockIdx.z; tzi < NTZ; tzi += gridDim.z)
        for (T tyi = blockIdx.y; tyi < NTY; tyi += gridDim.y) {
            const T bz0 = tzi * TZ, by0 = tyi * TY;
            for (int r = threadIdx.y; r < R; r += NT)
                tile_read<T, IS3D, ALIGNED, TY>(img, L, extra, g, BD, BH, BW, bz0, by0, bx0, r,
                                                tx, par, cin);
            __syncthreads();
            for (int r = threadIdx.y; r < R; r += NT) tile_unite<IS3D, TY>(r, tx, par, cin);
            __syncthreads();
            for (int r = threadIdx.y; r < R; r += NT)
                tile_write<T, IS3D, TY>(L, g, bz0, by0, bx0, r, tx, par);
            __syncthreads();  // before the next tile reuses the shared arrays
        }
}

// Reduction over the tile faces: only blocks on a face can have connected neighbours outside
// their tile (their information word lists them); interior blocks are skipped unread.
template <typename T, bool IS3D, int TY, int TZ>
__global__ void tile_reduce(T* L, T* extra, GEO_PARAMS, T BD, T BH, T BW) {
    GEO_MAKE
    FOR_BLOCKS(BD, BH, BW) {
        T tx = bx % TILE_X, ty = by % TY, tz = bz % TZ;
        bool face = ty == 0 || tx == 0 || tx == TILE_X - 1 || (IS3D && (tz == 0 || ty == TY - 1));
        if (!face) continue;
        T z = 2 * bz, y = 2 * by, x = 2 * bx;
        u64 s = (u64)z * g.HW + (u64)y * g.W + x;
        u32 info = (u32)*info_ptr<T, IS3D>(L, extra, s, z, y, x, g);
        u32 conn = info >> 8;
        if (!conn) continue;
        unite_neighbours<T, IS3D>(L, s, conn, g);
    }
}
