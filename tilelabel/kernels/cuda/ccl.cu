// tilelabel GPU connected-component labeling kernels (BUF, BKE, pixel UF) and renumbering.
//
// Compiled at run time through cupy.RawModule (NVRTC), so no standard headers are included.
// Every kernel is templated on the label type T (unsigned int or unsigned long long); all voxel
// indices are held in T and all address arithmetic is done in 64 bits, so volumes over 2^31 and
// 2^32 voxels work (T = uint64 is required above 2^32 - 1 voxels; the Python side takes care of it).
//
// Block algorithms (Allegretti et al., TPDS 2020): the union-find forest lives in the label array
// itself, one node per 2x2 (2D) or 2x2x2 (3D) block, stored at the block's top-left voxel (its
// "slot").  A node's *id* is the raster index of the block's first foreground voxel, not the index
// of its slot: union by smaller id then makes the root of every tree the block that holds the
// component's first voxel, so the root's id is the component's scipy key (raster index of its
// first voxel).  A slot holds a pointer (the slot of an ancestor, so Find needs no index
// arithmetic) or, for a root, its id with the top bit set as a tag (so 32-bit forests serve up to
// 2^31 - 1 voxels; larger uint32 requests are computed in uint64 and narrowed).  The last
// Compression leaves every block with its root's tagged id.  The block's information word (BKE:
// voxel mask | union bits << 8; BUF: voxel mask) is stored in the block's top-right voxel as in
// the paper, or the bottom-left / front one when the block has no top-right voxel; only the
// single-voxel block (the far corner when every axis has odd size) needs the one-element `extra`
// buffer (the paper's degenerate case).
//
// Renumbering: roots set one bit at their id in a bitmap over voxels; an exclusive scan of the
// words' popcounts gives, for any key k, rank(k) = prefix[k/32] + popc(bits below k in its word),
// and the final label is rank + 1.  The set bits, in order, are also the per-label first voxels.

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ u32 mulhi(u32 a, u32 b) { return __umulhi(a, b); }
__device__ __forceinline__ u64 mulhi(u64 a, u64 b) { return __umul64hi(a, b); }

// Granlund-Montgomery division by an invariant: exact for every n representable in T.
template <typename T>
__device__ __forceinline__ T fdiv(T n, T m, u32 s1, u32 s2) {
    T t = mulhi(m, n);
    return (t + ((n - t) >> s1)) >> s2;
}

template <typename T>
__device__ __forceinline__ T amin(T* p, T v);
template <>
__device__ __forceinline__ u32 amin<u32>(u32* p, u32 v) { return atomicMin(p, v); }
template <>
__device__ __forceinline__ u64 amin<u64>(u64* p, u64 v) { return atomicMin(p, v); }

// Geometry of the volume (D = 1 for 2D), with magic numbers for division by W and by H*W.
template <typename T>
struct Geo {
    T D, H, W, HW;
    T mW, mHW;
    u32 w1, w2, hw1, hw2;
};

#define GEO_PARAMS                                                                        \
    T D, T H, T W, T mW, u32 w1, u32 w2, T mHW, u32 hw1, u32 hw2
#define GEO_MAKE                                                                          \
    Geo<T> g;                                                                             \
    g.D = D;                                                                              \
    g.H = H;                                                                              \
    g.W = W;                                                                              \
    g.HW = H * W;                                                                         \
    g.mW = mW;                                                                            \
    g.mHW = mHW;                                                                          \
    g.w1 = w1;                                                                            \
    g.w2 = w2;                                                                            \
    g.hw1 = hw1;                                                                          \
    g.hw2 = hw2;

// The slot (top-left voxel) of the block that holds voxel v.  Not used by the kernels any more
// (the forest stores slots, so Find needs no division); kept with fdiv for diagnostics.
template <typename T, bool IS3D>
__device__ __forceinline__ T slot_of(T v, const Geo<T>& g) {
    if (IS3D) {
        T z = fdiv<T>(v, g.mHW, g.hw1, g.hw2);
        T r = v - z * g.HW;
        T y = fdiv<T>(r, g.mW, g.w1, g.w2);
        T x = r - y * g.W;
        return v - (z & 1) * g.HW - (y & 1) * g.W - (x & 1);
    } else {
        T y = fdiv<T>(v, g.mW, g.w1, g.w2);
        T x = v - y * g.W;
        return v - (y & 1) * g.W - (x & 1);
    }
}

#ifdef TL_COUNT
// Diagnostics (benchmarks only): [0] union calls, [1] union rounds, [2] find steps,
// [3] blocks that reach the neighbour unions.
extern "C" __device__ unsigned long long tl_counts[4];
#define TL_INC(i) atomicAdd(&tl_counts[i], 1ull)
#else
#define TL_INC(i)
#endif

// Block forest: a slot holds either a pointer (the slot of an ancestor block) or, for a root, its
// id with the tag bit set.  Find follows pointers with no index arithmetic.
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
        TL_INC(2);
    }
    f = p & ~tag_bit<T>();
    return a;
}

// Union by smaller id (Oliveira & Lotufo's atomicMin; TL_UNION_CAS: compare-and-swap on the
// root's tagged id, measured slower).  Every link goes from a larger id to a smaller one: no
// cycles.
template <typename T>
__device__ __forceinline__ void bunion(T* L, T a, T b) {
    const T TAG = tag_bit<T>();
    while (true) {
        TL_INC(1);
        T fa, fb;
        a = bfind<T>(L, a, fa);
        b = bfind<T>(L, b, fb);
        if (a == b) return;
#ifndef TL_UNION_CAS
        // Oliveira's atomicMin: pointers are below every tagged id, so the root is linked even if
        // another thread linked it first; then that thread's target is united with ours next.
        if (fa < fb) {
            T old = amin<T>(&L[(u64)b], a);
            if (old == (fb | TAG)) return;
            b = old;
        } else {
            T old = amin<T>(&L[(u64)a], b);
            if (old == (fa | TAG)) return;
            a = old;
        }
#else
        if (fa < fb) {
            if (atomicCAS(&L[(u64)b], fb | TAG, a) == (fb | TAG)) return;
        } else {
            if (atomicCAS(&L[(u64)a], fa | TAG, b) == (fa | TAG)) return;
        }
#endif
    }
}

// The same, not inlined: called from unrolled loops over neighbours (keeps the code small).
template <typename T>
__device__ __noinline__ void bunion_call(T* L, T a, T b) {
    TL_INC(0);
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
#ifdef TL_LEFT_FIRST
    if (((conn >> (kb + 3)) & 1) && (cand & region(0, -1))) {
        k = kb + 3;
        dby = 0;
        dbx = -1;
        return true;
    }
#endif
#ifdef TL_BELOW_FIRST
    if (IS3D && ((conn >> 4) & 1)) {
        k = 4;
        dbz = -1;
        dby = dbx = 0;
        return true;
    }
#endif
    if (IS3D && (conn & 0x1FF)) {
        k = __ffs(conn & 0x1FF) - 1;
        dbz = -1;
        dby = k / 3 - 1;
        dbx = k % 3 - 1;
        return true;
    }
#ifdef TL_NO_FWD
    constexpr int NJ = 4;
#else
    constexpr int NJ = 8;
#endif
#pragma unroll
    for (int j = 0; j < NJ; j++) {
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
    TL_INC(3);
#pragma unroll
    for (int k = 0; k < NK; k++) {
        if (!((conn >> k) & 1)) continue;
        T pn = P[k];
        if (pn == rX || pn == m1 || pn == m2 || pn == m3) continue;
        bunion_call<T>(L, rX, pn);
#ifdef TL_RX_REFRESH
        {
            T f;
            rX = bfind<T>(L, rX, f);
        }
#endif
        m3 = m2;
        m2 = m1;
        m1 = pn;
    }
}

// Thread-to-block mapping with grid-stride loops in y and z.
#define FOR_BLOCKS(BD, BH, BW)                                                               \
    T bx = (T)blockIdx.x * blockDim.x + threadIdx.x;                                         \
    if (bx >= BW) return;                                                                     \
    for (T bz = (T)blockIdx.z * blockDim.z + threadIdx.z; bz < BD;                           \
         bz += (T)gridDim.z * blockDim.z)                                                     \
        for (T by = (T)blockIdx.y * blockDim.y + threadIdx.y; by < BH;                       \
             by += (T)gridDim.y * blockDim.y)

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
// BKE_TILE: a tile-local union-find in shared memory, then global unions across tile faces only
// (the tile merging of Oliveira & Lotufo and of Playne & Hawick's HA4, on BKE's 2x2(x2) blocks).
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
// ---------------------------------------------------------------------------------------------

#define TILE_X 32
#define LTAG 0x80000000u
#define LBG 0xFFFFFFFFu  // background (or outside the volume) in the shared forest

// Find with path halving (each node on the way skips to its grandparent).  The plain store is
// safe against concurrent unions: the node is no root, so a thread's atomicMin on it returns a
// pointer and that thread unites its own root with that old parent next (see bunion), and both
// values stored point to an ancestor of smaller key (no cycles).  Without halving, tiles of dense
// volumes grew chains hundreds of blocks long (measured: the tile pass 10.9 ms at d=0.2).
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

// ---------------------------------------------------------------------------------------------
// Shared by BUF and BKE: compression (plain or inline), marking of roots, final labeling.
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

template <typename T>
__device__ __forceinline__ T rank_of(T k, const u32* __restrict__ bitmap,
                                     const T* __restrict__ prefix) {
    u64 w = (u64)k >> 5;
    return prefix[w] + (T)__popc(bitmap[w] & ((1u << (k & 31)) - 1u)) + 1;
}

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

// ---------------------------------------------------------------------------------------------
// Pixel-based union-find (any connectivity; used for 2D 4, 3D 6 and 18, and as a baseline).
// Background voxels hold the sentinel ~0 until the final pass.
// ---------------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T pfind(const T* L, T a) {
    T p;
    while ((p = L[(u64)a]) != a) a = p;
    return a;
}

template <typename T>
__device__ __forceinline__ void punion(T* L, T a, T b) {
    bool done;
    do {
        a = pfind<T>(L, a);
        b = pfind<T>(L, b);
        if (a < b) {
            T old = amin<T>(&L[(u64)b], a);
            done = (old == b);
            b = old;
        } else if (b < a) {
            T old = amin<T>(&L[(u64)a], b);
            done = (old == a);
            a = old;
        } else {
            done = true;
        }
    } while (!done);
}

template <typename T>
__global__ void uf_init(const u8* __restrict__ img, T* L, u64 N) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x)
        L[v] = img[v] ? (T)v : (T)~(T)0;
}

// Visit the foreground backward neighbours u of voxel v = (z, y, x) under CONN (4 or 8 in 2D;
// 6, 18 or 26 in 3D): fn(u, k) (k = the neighbour's index 0..12 in the 3x3x3 cube, a constant
// once unrolled) returns false to stop.
template <typename T, int CONN, typename F>
__device__ __forceinline__ void for_backward(const u8* __restrict__ img, u64 v, T z, T y, T x, T H,
                                             T W, u64 HW, F fn) {
    constexpr bool IS3D = CONN == 6 || CONN == 18 || CONN == 26;
#pragma unroll
    for (int dz = (IS3D ? -1 : 0); dz <= 0; dz++)
#pragma unroll
        for (int dy = -1; dy <= 1; dy++)
#pragma unroll
            for (int dx = -1; dx <= 1; dx++) {
                if (dz == 0 && (dy > 0 || (dy == 0 && dx >= 0))) continue;
                int nz = (dz != 0) + (dy != 0) + (dx != 0);
                if ((CONN == 4 || CONN == 6) && nz > 1) continue;
                if (CONN == 18 && nz > 2) continue;
                if (dz < 0 && z == 0) continue;
                if (dy < 0 && y == 0) continue;
                if (dy > 0 && y + 1 >= H) continue;
                if (dx < 0 && x == 0) continue;
                if (dx > 0 && x + 1 >= W) continue;
                u64 u = (u64)((i64)v + dz * (i64)HW + dy * (i64)W + dx);
                if (img[u] && !fn(u, (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1))) return;
            }
}

#define FOR_VOXELS(D, H, W)                                                                  \
    T x = (T)blockIdx.x * blockDim.x + threadIdx.x;                                          \
    if (x >= W) return;                                                                       \
    u64 HW = (u64)H * W;                                                                      \
    for (T z = (T)blockIdx.z * blockDim.z + threadIdx.z; z < D; z += (T)gridDim.z * blockDim.z) \
        for (T y = (T)blockIdx.y * blockDim.y + threadIdx.y; y < H;                          \
             y += (T)gridDim.y * blockDim.y)

template <typename T>
__device__ __noinline__ void punion_call(T* L, T a, T b) {
    punion<T>(L, a, b);
}

// Unions of voxel v (r: an ancestor of v) with its foreground backward neighbours: their values
// (ancestors) are loaded first, and a neighbour whose value is r, or a value already united with
// v by this thread, needs no union.
template <typename T, int CONN>
__device__ __forceinline__ void unite_voxel(const u8* __restrict__ img, T* L, u64 v, T r, T z, T y,
                                            T x, T H, T W, u64 HW) {
    T P[13];
    u32 have = 0;
    for_backward<T, CONN>(img, v, z, y, x, H, W, HW, [&](u64 u, int k) {
        P[k] = L[u];
        have |= 1u << k;
        return true;
    });
    T m1 = r, m2 = r, m3 = r;
#pragma unroll
    for (int k = 0; k < 13; k++) {
        if (!((have >> k) & 1)) continue;
        T pn = P[k];
        if (pn == r || pn == m1 || pn == m2 || pn == m3) continue;
        punion_call<T>(L, r, pn);
        m3 = m2;
        m2 = m1;
        m1 = pn;
    }
}

// UF Merge: union with every foreground backward neighbour.
template <typename T, int CONN>
__global__ void uf_merge(const u8* __restrict__ img, T* L, T D, T H, T W) {
    FOR_VOXELS(D, H, W) {
        u64 v = (u64)z * HW + (u64)y * W + x;
        if (!img[v]) continue;
        unite_voxel<T, CONN>(img, L, v, (T)v, z, y, x, H, W, HW);
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
        for_backward<T, CONN>(img, v, z, y, x, H, W, HW, [&](u64 u, int) {
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
        unite_voxel<T, CONN>(img, L, v, L[v], z, y, x, H, W, HW);
    }
}

#ifndef TL_EMU
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

#endif

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

// ---------------------------------------------------------------------------------------------
// Exclusive scan of the bitmap's popcounts: prefix[w] = number of set bits in words before w.
// Tiles of 256 threads x 8 words.
// ---------------------------------------------------------------------------------------------

#ifndef TL_EMU
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

// One block of 512 threads scans the tile sums in place (exclusive) and writes the grand total
// to tile_sums[ntiles].
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

#endif

// First voxel of every label of an already labeled array (when nothing was kept from labeling).
template <typename T>
__global__ void first_from_labels(const T* __restrict__ L, u64 N, u64* out) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x) {
        T l = L[v];
        if (l) atomicMin(&out[(u64)l - 1], v);
    }
}
