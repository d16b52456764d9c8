// The block forest shared by the block families (block.cu: BUF and BKE; tile.cu: BKE_TILE).
//
// Block algorithms (Allegretti et al., TPDS 2020) serve full connectivity (2D 8, 3D 26): every
// foreground voxel of a 2x2 (2D) or 2x2x2 (3D) block has the same label, so the union-find forest
// has one node per block.  It lives in the label array itself, as in the paper (no allocation
// beyond the output): a block's node is the entry of its top-left(-front) voxel, its *slot*.
//
// - Node id = raster index of the block's first *foreground* voxel, not of its slot.  Union by
//   smaller id then makes the root of every tree the block that holds the component's first
//   voxel, so the root's id is the component's scipy key and renumbering needs no per-component
//   minimum (see renumber.cu).
// - A slot holds a pointer (the slot of an ancestor, so Find follows pointers with no index
//   arithmetic) or, for a root, its id with the top bit set as a tag.  The tag bit caps 32-bit
//   forests at 2^31 - 1 voxels; larger uint32 requests are computed in uint64 and narrowed.
// - The last Compression leaves every block with its root's tagged id.
// - A block's information word (BKE: voxel mask | union bits << 8; BUF: voxel mask) is kept in its
//   top-right voxel as in the paper, or the bottom-left / front one when the block has no
//   top-right voxel; only the single-voxel block (the far corner when every side is odd) needs
//   the one-element `extra` buffer (the paper's degenerate case).
#ifndef TILELABEL_BLOCKS_CUH
#define TILELABEL_BLOCKS_CUH

#include "common.cuh"

// Geometry of the volume (D = 1 for 2D).
template <typename T>
struct Geo {
    T D, H, W, HW;
};

#define GEO_PARAMS T D, T H, T W
#define GEO_MAKE \
    Geo<T> g;    \
    g.D = D;     \
    g.H = H;     \
    g.W = W;     \
    g.HW = H * W;

// Thread-to-block mapping with grid-stride loops in y and z.
#define FOR_BLOCKS(BD, BH, BW)                                                               \
    T bx = (T)blockIdx.x * blockDim.x + threadIdx.x;                                         \
    if (bx >= BW) return;                                                                     \
    for (T bz = (T)blockIdx.z * blockDim.z + threadIdx.z; bz < BD;                           \
         bz += (T)gridDim.z * blockDim.z)                                                     \
        for (T by = (T)blockIdx.y * blockDim.y + threadIdx.y; by < BH;                       \
             by += (T)gridDim.y * blockDim.y)

template <typename T>
__device__ __forceinline__ constexpr T tag_bit() {
    return (T)1 << (sizeof(T) * 8 - 1);
}

// Root slot of the tree holding slot a; f receives the root's id.
template <typename T>
__device__ __forceinline__ T bfind(const T* L, T a, T& f) {
    T p;
    while (!((p = L[(u64)a]) & tag_bit<T>())) {
        a = p;
    }
    f = p & ~tag_bit<T>();
    return a;
}

// Union by smaller id with atomicMin on the root's tagged id (Oliveira & Lotufo).  Pointers are
// below every tagged id, so the root is linked even when another thread linked it first; that
// thread's target is then united with ours in the next round (no compare-and-swap retries).
// Every link goes from a larger id to a smaller one: no cycles.
template <typename T>
__device__ __forceinline__ void bunion(T* L, T a, T b) {
    const T TAG = tag_bit<T>();
    while (true) {
        T fa, fb;
        a = bfind<T>(L, a, fa);
        b = bfind<T>(L, b, fb);
        if (a == b) return;
        if (fa < fb) {
            T old = amin<T>(&L[(u64)b], a);
            if (old == (fb | TAG)) return;
            b = old;
        } else {
            T old = amin<T>(&L[(u64)a], b);
            if (old == (fa | TAG)) return;
            a = old;
        }
    }
}

// The same, not inlined: called from unrolled loops over neighbours (keeps the code small).
template <typename T>
__device__ __noinline__ void bunion_call(T* L, T a, T b) {
    bunion<T>(L, a, b);
}

// Where a block keeps its information word.
template <typename T, bool IS3D>
__device__ __forceinline__ T* info_ptr(T* L, T* extra, u64 s, T z, T y, T x, const Geo<T>& g) {
    if (x + 1 < g.W) return L + s + 1;
    if (y + 1 < g.H) return L + s + (u64)g.W;
    if (IS3D && z + 1 < g.D) return L + s + (u64)g.HW;
    return extra;
}

// Offset of the first foreground voxel of a block from its slot, given its voxel mask
// (bit dz*4 + dy*2 + dx, i.e. in raster order inside the block).
template <typename T, bool IS3D>
__device__ __forceinline__ T first_off(u32 mask, const Geo<T>& g) {
    u32 j = __ffs(mask) - 1;
    T off = (T)(j & 1);
    if (j & 2) off += g.W;
    if (IS3D && (j & 4)) off += g.HW;
    return off;
}

// ---------------------------------------------------------------------------------------------
// Reading a block's neighbourhood.
//
// Each z-plane of the 4x4(x4) cube around a block is a 16-bit word, bit (dy+1)*4 + (dx+1) for
// dy, dx in -1..2 (bit order = raster order).  Only the voxels of the block itself and of its
// backward neighbours (the 13 / 4 blocks before it in raster order) are read.  The planes:
//   Pm: plane z-1 (all 16 voxels; 3D only), V0 / V1: the visible voxels of the same-plane
//   neighbours in planes z / z+1 (row y-1, and x-1 of rows y and y+1), m0 / m1: the block's own
//   voxels in planes z / z+1 (bit a*2 + b for row y+a, column x+b).
// A neighbour is connected when one of its voxels is foreground and within one step of a
// foreground voxel of the block ("hit" = visible voxels & dilated block voxels).
// ---------------------------------------------------------------------------------------------

// Voxels x-1, x, x+1 (and x+2 if RIGHT) of one row as bits 0..3; out-of-range voxels are 0.
// ALIGNED (W even, image base even): 16-bit loads of the pairs (x-2, x-1), (x, x+1), (x+2, x+3).
template <typename T, bool ALIGNED, bool RIGHT>
__device__ __forceinline__ u32 row_bits(const u8* __restrict__ img, u64 rb, T x, T W) {
    if (ALIGNED) {
        const unsigned short* p = (const unsigned short*)(img + rb + x);
        u32 a = x > 0 ? (u32)p[-1] : 0u;
        u32 b = p[0];
        u32 c = (RIGHT && x + 2 < W) ? (u32)p[1] : 0u;
        return ((a >> 8) ? 1u : 0u) | ((b & 0xFF) ? 2u : 0u) | ((b >> 8) ? 4u : 0u) |
               ((c & 0xFF) ? 8u : 0u);
    } else {
        u32 r = 0;
        if (x > 0 && img[rb + x - 1]) r |= 1;
        if (img[rb + x]) r |= 2;
        if (x + 1 < W && img[rb + x + 1]) r |= 4;
        if (RIGHT && x + 2 < W && img[rb + x + 2]) r |= 8;
        return r;
    }
}

// 3x3 dilation of a 2x2 block-plane mask, in the 4x4 plane layout.
__device__ __forceinline__ u32 dilate(u32 m) {
    u32 d = 0;
    if (m & 1) d |= 0x777u;
    if (m & 2) d |= 0x777u << 1;
    if (m & 4) d |= 0x777u << 4;
    if (m & 8) d |= 0x777u << 5;
    return d;
}

// Plane bits of the neighbour at in-plane block offset (dby, dbx).
__device__ __forceinline__ constexpr u32 region(int dby, int dbx) {
    return (dby < 0 ? 0x000Fu : (dby == 0 ? 0x0FF0u : 0xF000u)) &
           (dbx < 0 ? 0x1111u : (dbx == 0 ? 0x6666u : 0x8888u));
}

// Read a block's neighbourhood.  Returns the voxel mask (bit dz*4 + dy*2 + dx; 0: background);
// hprev: hit bits in plane z-1; hsame: hit bits in planes z and z+1 (merged; plane z includes the
// forward voxels x+2 of rows y, y+1 and row y+2, which belong to the forward neighbours of the
// same block plane); cand: foreground voxels of planes z and z+1 seen here that come before the
// block's first voxel in raster order (their blocks surely have smaller ids).
template <typename T, bool IS3D, bool ALIGNED>
__device__ __forceinline__ u32 read_nbhd(const u8* __restrict__ img, T z, T y, T x,
                                         const Geo<T>& g, u32& hprev, u32& hsame, u32& cand) {
    u64 s = (u64)z * (u64)g.HW + (u64)y * (u64)g.W;
    bool hy = y + 1 < g.H, hz = IS3D && z + 1 < g.D;
    u32 r0 = row_bits<T, ALIGNED, true>(img, s, x, g.W);
    u32 r1 = hy ? row_bits<T, ALIGNED, true>(img, s + g.W, x, g.W) : 0u;
    u32 m0 = ((r0 >> 1) & 3) | (((r1 >> 1) & 3) << 2);
    u32 q0 = 0, q1 = 0, m1 = 0;
    if (hz) {
        q0 = row_bits<T, ALIGNED, false>(img, s + g.HW, x, g.W);
        q1 = hy ? row_bits<T, ALIGNED, false>(img, s + g.HW + g.W, x, g.W) : 0u;
        m1 = ((q0 >> 1) & 3) | (((q1 >> 1) & 3) << 2);
    }
    u32 mask = m0 | (m1 << 4);
    hprev = hsame = cand = 0;
    if (!mask) return 0;
    // plane z: row y-1; x-1 and x+2 of rows y, y+1; row y+2
    u32 A0 = (y > 0 ? row_bits<T, ALIGNED, true>(img, s - g.W, x, g.W) : 0u) | ((r0 & 1) << 4) |
             ((r0 & 8) << 4) | ((r1 & 1) << 8) | ((r1 & 8) << 8) |
             (y + 2 < g.H ? row_bits<T, ALIGNED, true>(img, s + 2 * (u64)g.W, x, g.W) << 12 : 0u);
    u32 V1 = 0;
    if (hz)
        V1 = (y > 0 ? row_bits<T, ALIGNED, true>(img, s + g.HW - g.W, x, g.W) : 0u) |
             ((q0 & 1) << 4) | ((q1 & 1) << 8);
    u32 R = dilate(m0) | dilate(m1);
    hsame = (A0 | V1) & R;
    if (IS3D && z > 0 && m0) {
        u64 p = s - g.HW;
        u32 Pm = (y > 0 ? row_bits<T, ALIGNED, true>(img, p - g.W, x, g.W) : 0u) |
                 (row_bits<T, ALIGNED, true>(img, p, x, g.W) << 4) |
                 (hy ? row_bits<T, ALIGNED, true>(img, p + g.W, x, g.W) << 8 : 0u) |
                 (y + 2 < g.H ? row_bits<T, ALIGNED, true>(img, p + 2 * (u64)g.W, x, g.W) << 12
                              : 0u);
        hprev = Pm & dilate(m0);
    }
    u32 j = __ffs(m0 ? m0 : m1) - 1;
    u32 before = (1u << (((j >> 1) + 1) * 4 + (j & 1) + 1)) - 1u;
    cand = m0 ? (A0 & before) : (A0 | (V1 & before));
    return mask;
}

// Connected backward neighbours as bits k (3D: k = 0..8 in plane z-1 by (dby, dbx) in raster
// order, 9..11 row y-1, 12 left; 2D: 0..2 row y-1, 3 left), the order of nb_offset().
template <bool IS3D>
__device__ __forceinline__ u32 conn_bits(u32 hprev, u32 hsame) {
    u32 c = 0;
    constexpr int kb = IS3D ? 9 : 0;
    if (IS3D) {
#pragma unroll
        for (int k = 0; k < 9; k++)
            if (hprev & region(k / 3 - 1, k % 3 - 1)) c |= 1u << k;
    }
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (hsame & region(k < 3 ? -1 : 0, k < 3 ? k - 1 : -1)) c |= 1u << (kb + k);
    return c;
}

template <bool IS3D>
__device__ __forceinline__ i64 nb_offset(int k, i64 W, i64 HW) {
    // offset (in voxels) from a block's slot to the slot of backward neighbour k
    if (IS3D) {
        int bz = k < 9 ? -1 : 0;
        int by = k < 9 ? k / 3 - 1 : (k < 12 ? -1 : 0);
        int bx = k < 9 ? k % 3 - 1 : (k < 12 ? (k - 9) - 1 : -1);
        return 2 * (bz * HW + by * W + bx);
    } else {
        int by = k < 3 ? -1 : 0;
        int bx = k < 3 ? k - 1 : -1;
        return 2 * (by * W + bx);
    }
}

// Unions of block X (slot s) with the neighbours in conn.  A slot's value stands for the block
// itself when tagged (a root), else for the ancestor it points to; the neighbours' values are
// loaded first (independent loads), and a neighbour whose ancestor is X's, or one already united
// with X by this thread, needs no union.
template <typename T, bool IS3D>
__device__ __forceinline__ void unite_neighbours(T* L, u64 s, u32 conn, const Geo<T>& g) {
    constexpr int NK = IS3D ? 13 : 4;
    const T TAG = tag_bit<T>();
    T P[NK];
#pragma unroll
    for (int k = 0; k < NK; k++)
        if ((conn >> k) & 1) {
            u64 ns = (u64)((i64)s + nb_offset<IS3D>(k, (i64)g.W, (i64)g.HW));
            T v = L[ns];
            P[k] = (v & TAG) ? (T)ns : v;
        }
    T v = L[s];
    T rX = (v & TAG) ? (T)s : v;
    T m1 = rX, m2 = rX, m3 = rX;
#pragma unroll
    for (int k = 0; k < NK; k++) {
        if (!((conn >> k) & 1)) continue;
        T pn = P[k];
        if (pn == rX || pn == m1 || pn == m2 || pn == m3) continue;
        bunion_call<T>(L, rX, pn);
        m3 = m2;
        m2 = m1;
        m1 = pn;
    }
}

#endif  // TILELABEL_BLOCKS_CUH
