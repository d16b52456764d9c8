// SEG: segment (run) labeling in shared-memory tiles, for every connectivity; made for the face
// connectivities (2D 4, 3D 6 and 18) that 2x2(x2) blocks cannot serve.
//
// HA4's idea (Hennequin et al.), bit-parallel: a thread takes 32 voxels of a row (a *row word*) as
// one 32-bit mask, and the runs of set bits of a word (*segments*) are the union-find nodes.  Two
// segments of neighbouring rows are united only at a voxel where one of them starts (word_pairs),
// found for the whole word with a few bit operations, so the work of a word grows with its
// segments, not its voxels.  A segment's node is its first voxel.
//
// 1. seg_tile: a CUDA block labels a tile of 32*KX x KY x KZ voxels, one thread per row word, with
//    a union-find over the tile's segments in shared memory (slot = tile-local voxel index; union
//    by smaller slot, so each tile component's root is its first voxel: raster order inside a box
//    is the global one).  Each segment's first voxel gets, in the label array, the global index of
//    its tile root: the voxel forest of voxels.cuh on segment starts, depth 1.  A tile root whose
//    component has no voxel on a face shared with another tile is a final root: its bit goes
//    straight to the root bitmap; the others' bits go to `troot`.
// 2. seg_merge: unions in the global forest across tile faces only, by the threads of row words on
//    a face.
// 3. seg_compress: each tile root of `troot` gets its root; those that are one set their bit.
// Then renumber.cu's scan, and
// 4. seg_roots: each tile root of troot gets its final label, the one entry other segments read;
// 5. seg_final: a warp per 32 row words finds their segments again, labels them side by side
//    (a segment start holds its tile root, whose bit or entry gives the label) and writes every
//    voxel, coalesced.
//
// VEC (rows of a multiple of 32 voxels, input 16-byte aligned): 16-byte loads and stores, bitmap
// words stored whole; otherwise byte loads, scalar stores and atomicOr into zeroed bitmaps.
// Global indices are 64-bit; tile slots (32 * KX * KY * KZ of them) are 32-bit.
#include "voxels.cuh"

// Backward row directions j of a connectivity: row (z + dz, y + dy), and whether voxels x - 1 and
// x + 1 of that row neighbour voxel x too (wide) or only voxel x.  2D 4: (0, -1); 8: (0, -1) wide;
// 3D 6: (0, -1), (-1, 0); 18: (0, -1) wide, (-1, -1), (-1, 0) wide, (-1, +1); 26: all four wide.
template <int CONN>
__device__ __forceinline__ constexpr int n_dirs() {
    return (CONN == 4 || CONN == 8) ? 1 : (CONN == 6 ? 2 : 4);
}
template <int CONN>
__device__ __forceinline__ constexpr int dir_dz(int j) {
    return (CONN == 4 || CONN == 8 || j == 0) ? 0 : -1;
}
template <int CONN>
__device__ __forceinline__ constexpr int dir_dy(int j) {
    return (CONN == 4 || CONN == 8 || j == 0) ? -1 : (CONN == 6 ? 0 : j - 2);
}
template <int CONN>
__device__ __forceinline__ constexpr bool dir_wide(int j) {
    return CONN == 8 || CONN == 26 || (CONN == 18 && (j == 0 || j == 2));
}
// 18's diagonals (-1, -1) and (-1, +1) join voxels x of rows (z, y) and (z - 1, y + dy) that two
// face neighbours, voxels x of rows (z - 1, y) and (z, y + dy), both touch: where either is set,
// the other directions' unions already join the two, and the diagonal needs no pair.
template <int CONN>
__device__ __forceinline__ constexpr bool dir_diag(int j) {
    return CONN == 18 && (j == 1 || j == 3);
}

// Whether direction j leaves the tile from tile row (ly, lz): then seg_merge unites its pairs.
template <int CONN, int KY>
__device__ __forceinline__ bool crosses(int j, int ly, int lz) {
    const int dy = dir_dy<CONN>(j);
    return (dy < 0 && ly == 0) || (dy > 0 && ly == KY - 1) || (dir_dz<CONN>(j) < 0 && lz == 0);
}

// First voxel of the segment of mask m that holds voxel x (bit x set).
__device__ __forceinline__ int seg_start(u32 m, int x) { return x + 1 - __clz(~(m << (31 - x))); }

// Foreground bits of 4 voxel bytes (any nonzero byte).
__device__ __forceinline__ u32 nibble(u32 v) {
    v |= v >> 4;
    v |= v >> 2;
    v |= v >> 1;
    return ((v & 0x01010101u) * 0x01020408u) >> 24;
}

// Mask of the row word whose first voxel has raster index `base`, of which `n` voxels lie in the
// volume (VEC: all 32, 16-byte aligned).
template <bool VEC>
__device__ __forceinline__ u32 load_mask(const u8* __restrict__ img, u64 base, u64 n) {
    if (VEC) {
        const uint4* p = (const uint4*)(img + base);
        const uint4 a = p[0], b = p[1];
        return nibble(a.x) | nibble(a.y) << 4 | nibble(a.z) << 8 | nibble(a.w) << 12 |
               nibble(b.x) << 16 | nibble(b.y) << 20 | nibble(b.z) << 24 | nibble(b.w) << 28;
    }
    u32 m = 0;
    const int k = n < 32 ? (int)n : 32;
    for (int i = 0; i < k; i++)
        if (img[base + i]) m |= 1u << i;
    return m;
}

// The pairs of voxels (x of row word c, x' of the neighbour row's word n) to unite, fn(x, x'):
// every two adjacent segments (one of c, one of n) get a pair.  The leftmost voxel x of the c
// segment adjacent to the n segment starts its segment, or else (its left neighbour touching
// nothing of the n segment) x + 1 starts the n segment; so pairs (x, x) where one of the two
// starts, and for wide directions (x, x - 1) where x starts and x - 1, not x, is in n, and
// (x, x + 1) where x + 1, not x, is in n.  x' = -1 and 32 are the last voxel of the word before
// (bit nl) and the first of the word after (nr): segments of neighbouring words are united by
// their own row, so those pairs are needed only where n lacks voxel 0 / 31.  No pair (x, x) at
// the voxels of `skip` (dir_diag).
template <typename F>
__device__ __forceinline__ void word_pairs(u32 c, u32 n, u32 nl, u32 nr, bool wide, u32 skip,
                                           F fn) {
    const u32 sc = c & ~(c << 1), sn = n & ~(n << 1);
    u32 p = c & n & (sc | sn) & ~skip;
    while (p) {
        const int x = __ffs(p) - 1;
        p &= p - 1;
        fn(x, x);
    }
    if (!wide) return;
    p = sc & ~n & ((n << 1) | (nl & 1));
    while (p) {
        const int x = __ffs(p) - 1;
        p &= p - 1;
        fn(x, x - 1);
    }
    p = c & ~n & ((n >> 1) | (nr << 31));
    while (p) {
        const int x = __ffs(p) - 1;
        p &= p - 1;
        fn(x, x + 1);
    }
}

// Shared-memory forest: a slot holds an ancestor's slot, a root its own.  sfind halves paths (its
// plain store only ever points a node to an ancestor of smaller slot; a union that loses its link
// to it re-unites the old parent next); sroot only reads, for when roots are being written.
__device__ __forceinline__ u32 sfind(u32* P, u32 a) {
    volatile u32* V = P;
    u32 p = V[a];
    while (p != a) {
        const u32 q = V[p];
        if (q == p) return p;
        V[a] = q;
        a = q;
        p = V[a];
    }
    return a;
}

__device__ __forceinline__ u32 sroot(const u32* P, u32 a) {
    const volatile u32* V = P;
    u32 p;
    while ((p = V[a]) != a) a = p;
    return a;
}

__device__ __forceinline__ void sunion(u32* P, u32 a, u32 b) {
    while (true) {
        a = sfind(P, a);
        b = sfind(P, b);
        if (a == b) return;
        if (a < b) {
            const u32 old = atomicMin(&P[b], a);
            if (old == b) return;
            b = old;
        } else {
            const u32 old = atomicMin(&P[a], b);
            if (old == a) return;
            a = old;
        }
    }
}

// bits of a row word (first voxel at raster index base) into a zeroed bitmap
__device__ __forceinline__ void or_bits(u32* bm, u64 base, u32 bits) {
    if (!bits) return;
    const u64 w = base >> 5;
    const u32 o = (u32)(base & 31);
    atomicOr(&bm[w], bits << o);
    if (o && (bits >> (32 - o))) atomicOr(&bm[w + 1], bits >> (32 - o));
}

// bits base..base+31 of a bitmap
__device__ __forceinline__ u32 get_bits(const u32* __restrict__ bm, u64 base, u64 nbits) {
    const u64 w = base >> 5;
    const u32 o = (u32)(base & 31);
    u32 b = bm[w] >> o;
    if (o && base - o + 32 < nbits) b |= bm[w + 1] << (32 - o);
    return b;
}

// Tiles of 32 * KX x KY x KZ voxels, one CUDA block per tile (grid-stride) and one thread per row
// word: thread r takes row word (kx, ly, lz) = (r % KX, r / KX % KY, r / (KX * KY)).
#define SEG_TILES                                                                           \
    constexpr int R = KX * KY * KZ, TX = 32 * KX;                                           \
    const u64 HW = (u64)H * W, ntx = ((u64)W + TX - 1) / TX, nty = ((u64)H + KY - 1) / KY;  \
    const u64 ntiles = ntx * nty * (((u64)D + KZ - 1) / KZ);                                \
    const int r = threadIdx.x, kx = r % KX, ly = r / KX % KY, lz = r / (KX * KY);           \
    for (u64 t = blockIdx.x; t < ntiles; t += gridDim.x)                                    \
        if (const u64 X0 = t % ntx * TX, Y0 = t / ntx % nty * KY, Z0 = t / ntx / nty * KZ, \
            xw = X0 + 32 * kx, y = Y0 + ly, z = Z0 + lz, base = z * HW + y * W + xw;        \
            true)

// Tile pass (blockDim.x = KX * KY * KZ).
template <typename T, int CONN, int KX, int KY, int KZ, bool VEC>
__global__ void __launch_bounds__(KX* KY* KZ)
    seg_tile(const u8* __restrict__ img, T* L, u32* troot, u32* bitmap, T D, T H, T W) {
    __shared__ u32 par[32 * KX * KY * KZ];
    __shared__ u32 M[KX * KY * KZ];     // row word masks
    __shared__ u32 face[KX * KY * KZ];  // roots of components on a face, by slot
    SEG_TILES {
        const bool in = xw < W && y < H && z < D;
        const u32 m = in ? load_mask<VEC>(img, base, W - xw) : 0u;
        const u32 st = m & ~(m << 1);
        const u32 s0 = 32 * r;  // the word's first slot
        M[r] = m;
        face[r] = 0;
        for (u32 b = st; b; b &= b - 1) par[s0 + __ffs(b) - 1] = s0 + __ffs(b) - 1;
        __syncthreads();
        // unions of the segments inside the tile
        if (m) {
            if (kx > 0 && (m & 1) && (M[r - 1] >> 31))
                sunion(par, s0, s0 - 32 + seg_start(M[r - 1], 31));
#pragma unroll 1
            for (int j = 0; j < n_dirs<CONN>(); j++) {
                if (crosses<CONN, KY>(j, ly, lz)) continue;  // seg_merge's
                const int rn = r + (dir_dz<CONN>(j) * KY + dir_dy<CONN>(j)) * KX;
                const u32 n = M[rn];
                const u32 nl = kx > 0 ? M[rn - 1] : 0u, nr = kx < KX - 1 ? M[rn + 1] : 0u;
                const u32 skip =
                    dir_diag<CONN>(j) ? M[r - KY * KX] | M[r + dir_dy<CONN>(j) * KX] : 0u;
                word_pairs(m, n, nl >> 31, nr & 1, dir_wide<CONN>(j), skip, [&](int x, int xn) {
                    const u32 b = xn < 0    ? 32 * (rn - 1) + seg_start(nl, 31)
                                  : xn > 31 ? 32 * (rn + 1)
                                            : 32 * rn + seg_start(n, xn);
                    sunion(par, s0 + seg_start(m, x), b);
                });
            }
        }
        __syncthreads();
        // every segment gets its root (read-only finds: nothing but roots is written now)
        for (u32 b = st; b; b &= b - 1) par[s0 + __ffs(b) - 1] = sroot(par, s0 + __ffs(b) - 1);
        __syncthreads();
        // components with a voxel on a face shared with another tile
        if (m) {
            u32 f = 0;
            if ((ly == 0 && y > 0) || (ly == KY - 1 && y + 1 < H) || (lz == 0 && z > 0) ||
                (lz == KZ - 1 && z + 1 < D))
                f = st;
            if (kx == 0 && X0 > 0) f |= m & 1;
            if (kx == KX - 1 && xw + 32 < W && (m >> 31)) f |= 1u << seg_start(m, 31);
            for (; f; f &= f - 1) {
                const u32 root = par[s0 + __ffs(f) - 1];
                atomicOr(&face[root >> 5], 1u << (root & 31));
            }
        }
        __syncthreads();
        // segment starts get the global index of their tile root; root bits
        u32 inner = 0, outer = 0;
        for (u32 b = st; b; b &= b - 1) {
            const int s = __ffs(b) - 1;
            const u32 root = par[s0 + s], rr = root >> 5;
            L[base + s] = (T)(Z0 * HW + Y0 * W + X0 + (u64)(rr / (KX * KY)) * HW +
                              (u64)(rr / KX % KY) * W + 32 * (rr % KX) + (root & 31));
            if (root == s0 + s) {
                if ((face[r] >> s) & 1)
                    outer |= 1u << s;
                else
                    inner |= 1u << s;
            }
        }
        if (in) {
            if (VEC) {
                bitmap[base >> 5] = inner;
                troot[base >> 5] = outer;
            } else {
                or_bits(bitmap, base, inner);
                or_bits(troot, base, outer);
            }
        }
        __syncthreads();  // before the next tile reuses the shared arrays
    }
}

template <typename T>
__device__ __forceinline__ void gunion(T* L, u64 p, u64 q) {
    punion_call<T>(L, L[p], L[q]);
}

// Unions across the tile faces (the pairs seg_tile leaves out), by the threads of the row words
// on a face.  The nodes are segment starts: a neighbour voxel's segment start is found in its
// word's mask (x' = -1 needs the word before).
template <typename T, int CONN, int KX, int KY, int KZ, bool VEC>
__global__ void __launch_bounds__(KX* KY* KZ)
    seg_merge(const u8* __restrict__ img, T* L, T D, T H, T W) {
    SEG_TILES {
        const bool left = kx == 0 && X0 > 0, right = kx == KX - 1 && xw + 32 < W;
        bool any = left || right;
#pragma unroll
        for (int j = 0; j < n_dirs<CONN>(); j++) any |= crosses<CONN, KY>(j, ly, lz);
        if (!any || xw >= W || y >= H || z >= D) continue;
        const u32 m = load_mask<VEC>(img, base, W - xw);
        if (!m) continue;
        const u32 sm = m & ~(m << 1);
        // the segment start of voxel x' of the row word at nb (x' = -1: of the word before)
        auto node = [&](u64 nb, u32 n, int xn) -> u64 {
            if (xn < 0) return nb - 32 + seg_start(load_mask<VEC>(img, nb - 32, 32), 31);
            return nb + (xn > 31 ? 32 : seg_start(n, xn));
        };
        auto seg = [&](int x) -> u64 { return base + ((sm >> x) & 1 ? x : seg_start(m, x)); };
        if (left && (m & 1) && img[base - 1]) gunion<T>(L, base, node(base, 0u, -1));
#pragma unroll 1
        for (int j = 0; j < n_dirs<CONN>(); j++) {
            const int dz = dir_dz<CONN>(j), dy = dir_dy<CONN>(j);
            const bool wide = dir_wide<CONN>(j), across = crosses<CONN, KY>(j, ly, lz);
            if (!across && !(wide && (left || right))) continue;
            if ((dy < 0 && y == 0) || (dy > 0 && y + 1 >= H) || (dz < 0 && z == 0)) continue;
            const u64 nb = (u64)((i64)base + dz * (i64)HW + dy * (i64)W);
            if (across) {
                const u32 n = load_mask<VEC>(img, nb, W - xw);
                const u32 nl = wide && xw > 0 && img[nb - 1];
                const u32 nr = wide && xw + 32 < W && img[nb + 32];
                word_pairs(m, n, nl, nr, wide, 0u,
                           [&](int x, int xn) { gunion<T>(L, seg(x), node(nb, n, xn)); });
            } else {  // wide, in the tile: only the pairs across its x faces
                if (left && (m & 1) && img[nb - 1]) gunion<T>(L, base, node(nb, 0u, -1));
                if (right && (m >> 31) && img[nb + 32]) gunion<T>(L, seg(31), nb + 32);
            }
        }
    }
}

// Each tile root of troot gets its root; the roots set their bit (one thread per bitmap word).
template <typename T>
__global__ void seg_compress(T* L, const u32* __restrict__ troot, u32* bitmap, u64 nwords) {
    for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < nwords;
         w += (u64)gridDim.x * blockDim.x) {
        u32 roots = 0;
        for (u32 b = troot[w]; b; b &= b - 1) {
            const T v = (T)(w * 32 + __ffs(b) - 1);
            const T g = pfind<T>(L, v);
            if (g == v)
                roots |= 1u << (__ffs(b) - 1);
            else
                L[v] = g;
        }
        if (roots) bitmap[w] |= roots;
    }
}

// 16 bytes of labels
template <typename T>
__device__ __forceinline__ void store16(T* p, const T* v) {
    if constexpr (sizeof(T) == 4)
        *(uint4*)p = make_uint4(v[0], v[1], v[2], v[3]);
    else
        *(ulonglong2*)p = make_ulonglong2(v[0], v[1]);
}

// Tile roots of troot get their final label (their entry holds their root), before seg_final
// reads them (one thread per bitmap word).
template <typename T>
__global__ void seg_roots(T* L, const u32* __restrict__ troot, const u32* __restrict__ bitmap,
                          const T* __restrict__ prefix, u64 nwords) {
    for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < nwords;
         w += (u64)gridDim.x * blockDim.x) {
        for (u32 b = troot[w]; b; b &= b - 1) {
            const u64 v = w * 32 + __ffs(b) - 1;
            L[v] = rank_of<T>(L[v], bitmap, prefix);
        }
    }
}

// Final labels of every voxel, a warp per 32 row words (blockDim.x = SEG_THREADS), in three
// phases so that loads and stores are coalesced and lookups run side by side:
// (a) lane = row word: its mask, and its segments listed in the warp's shared list (at most 16 a
//     word; the troot flag in bit 10);
// (b) lane = listed segment: its label.  A troot segment start holds its label (seg_roots), any
//     other its tile root g, labelled rank(g) if g is a root (its bit in the bitmap) or else by
//     g's entry (g is in troot);
// (c) 32 / E lanes a row word, E voxels a lane: the voxels' labels, stored 16 bytes at a time
//     (VEC) or one by one.
// Entries of troot are read by other warps while written, with the value they hold.
#define SEG_THREADS 256
template <typename T, bool VEC>
__global__ void __launch_bounds__(SEG_THREADS)
    seg_final(const u8* __restrict__ img, T* L, const u32* __restrict__ troot,
              const u32* __restrict__ bitmap, const T* __restrict__ prefix, T D, T H, T W) {
    constexpr u32 FULL = 0xffffffffu;
    constexpr int E = 16 / sizeof(T), LPW = 32 / E, WPI = 32 / LPW;
    __shared__ T lab[16 * SEG_THREADS];
    const int lane = threadIdx.x & 31;
    T* sl = lab + 16 * (threadIdx.x - lane);  // the warp's list of 512 segments
    const u64 nwr = ((u64)W + 31) / 32, nq = (u64)D * H * nwr, N = (u64)D * H * W;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 q0 = (u64)blockIdx.x * blockDim.x + threadIdx.x - lane; q0 < nq; q0 += stride) {
        // (a)
        const u64 q = q0 + lane;
        u32 m = 0, tb = 0;
        u64 base = q * 32;
        int n = 32;
        if (q < nq) {
            if (!VEC) {
                const u64 xw = q % nwr * 32;
                base = q / nwr * W + xw;
                n = W - xw < 32 ? (int)(W - xw) : 32;
            }
            m = load_mask<VEC>(img, base, n);
            tb = VEC ? troot[q] : get_bits(troot, base, N);
        }
        const u32 st = m & ~(m << 1);
        const int c = __popc(st);
        int off = c;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int y = __shfl_up_sync(FULL, off, d);
            if (lane >= d) off += y;
        }
        const int total = __shfl_sync(FULL, off, 31);
        off -= c;
        int k = off;
        for (u32 b = st; b; b &= b - 1) {
            const u32 s = __ffs(b) - 1;
            sl[k++] = (T)(32 * lane + s + ((tb >> s) & 1) * 1024);
        }
        __syncwarp();
        // (b)
        for (int i = lane; i - lane < total; i += 32) {
            const u32 code = i < total ? (u32)sl[i] : 0u;
            const u64 v = __shfl_sync(FULL, base, code >> 5 & 31) + (code & 31);
            if (i < total) {
                T g = L[v];
                if (!(code & 1024)) {
                    const u64 w = (u64)g >> 5;
                    const u32 below = (1u << (g & 31)) - 1u, bm = bitmap[w];
                    const T p = prefix[w];
                    g = (bm >> (g & 31)) & 1 ? p + (T)__popc(bm & below) + 1 : L[(u64)g];
                }
                sl[i] = g;
            }
        }
        __syncwarp();
        // (c)
        const int x0 = lane % LPW * E;
#pragma unroll 1
        for (int j0 = 0; j0 < 32; j0 += WPI) {
            const int j = j0 + lane / LPW;
            const u32 mj = __shfl_sync(FULL, m, j), sj = __shfl_sync(FULL, st, j);
            const int oj = __shfl_sync(FULL, off, j), nj = __shfl_sync(FULL, n, j);
            const u64 bj = __shfl_sync(FULL, base, j);
            if (q0 + j >= nq) continue;
            int kk = oj + __popc(sj & ((1u << x0) - 1u)) - 1;  // segment of voxel x0 - 1
            T val[E];
#pragma unroll
            for (int e = 0; e < E; e++) {
                const int x = x0 + e;
                kk += (sj >> x) & 1;
                val[e] = (mj >> x) & 1 ? sl[kk] : (T)0;
            }
            if (VEC) {
                store16<T>(L + bj + x0, val);
            } else {
#pragma unroll
                for (int e = 0; e < E; e++)
                    if (x0 + e < nj) L[bj + x0 + e] = val[e];
            }
        }
        __syncwarp();  // before the next round rewrites the list
    }
}
