// Per-label statistics of a labeled chunk in one pass (voxel count, box, coordinate sums, and
// optionally intensity sum / min / max, and sums of coordinate products and of squared
// intensities for second moments), the device side of Backend.label_stats.
//
// Aggregation before global memory (the idea of HA4's CCA kernel, Hennequin et al.): a warp reads
// 32 consecutive voxels of a row at a time; a run (consecutive voxels of one label) is found from
// two ballots, and the lane at its start gets the run's count, coordinate sums and box in closed
// form (and its intensity through a segmented warp reduction), so there is at most one set of
// atomics per run piece instead of one per voxel. On top of that, each warp walks a contiguous
// range of rows and keeps one *pending* accumulator in registers (lane 0): a run that reaches the
// end of the 32 lanes becomes pending, and later runs of the same label that start at lane 0 or
// reach lane 31 are added to it without touching global memory. A component that fills whole
// rows (a big blob, a filled volume) costs one set of atomics per warp, not per run.
//
// Layout of the outputs (field-major, n labels): count[n] (u64); csum[3][n] (i64, local z, y, x
// sums); lo[3][n], hi[3][n] (i32, local inclusive box); isum[n] (f64); imin[n], imax[n] (u64,
// order-preserving encodings of doubles so that integer atomicMin / atomicMax apply; decoded on
// the host; NaN is the smallest key of the min and the largest of the max, so that a NaN wins as
// in np.min / np.max); with HAS_M, m2[6][n] (i64, local zz, zy, zx, yy, yx, xx sums; a run's in
// closed form) and isq[n] (f64, with HAS_I). The host adds the chunk offset (offset * count to
// the sums, the cross terms to m2).

#define FULL_MASK 0xffffffffu

// every double but NaN (-inf, -0.0, +0.0 and +inf included) has a key strictly between 0 and ~0
__device__ __forceinline__ unsigned long long ord_key(double v) {
    unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b & 0x8000000000000000ULL) ? ~b : (b | 0x8000000000000000ULL);
}

// the min's key: NaN is 0, below every other (it wins atomicMin; the host decodes 0 to NaN)
__device__ __forceinline__ unsigned long long min_key(double v) {
    return v != v ? 0ULL : ord_key(v);
}

// the max's key: NaN is ~0, above every other (it wins atomicMax; the host decodes ~0 to NaN)
__device__ __forceinline__ unsigned long long max_key(double v) {
    return v != v ? ~0ULL : ord_key(v);
}

// NaN-propagating min / max (np.minimum / np.maximum): fmin / fmax skip a NaN
__device__ __forceinline__ double nan_min(double a, double b) {
    return (b != b || b < a) ? b : a;
}

__device__ __forceinline__ double nan_max(double a, double b) {
    return (b != b || b > a) ? b : a;
}

struct Acc {
    long long c, sz, sy, sx;
    int lz, ly, lx, hz, hy, hx;
    double s, mn, mx;
    long long mzz, mzy, mzx, myy, myx, mxx;  // with HAS_M
    double s2;                               // with HAS_M and HAS_I
};

// 0^2 + 1^2 + ... + k^2 (0 for k < 0)
__device__ __forceinline__ long long squares(long long k) {
    return k > 0 ? k * (k + 1) * (2 * k + 1) / 6 : 0;
}

template <bool HAS_M>
__device__ __forceinline__ void acc_add(Acc& a, const Acc& b) {
    a.c += b.c;
    a.sz += b.sz;
    a.sy += b.sy;
    a.sx += b.sx;
    a.lz = min(a.lz, b.lz);
    a.ly = min(a.ly, b.ly);
    a.lx = min(a.lx, b.lx);
    a.hz = max(a.hz, b.hz);
    a.hy = max(a.hy, b.hy);
    a.hx = max(a.hx, b.hx);
    a.s += b.s;
    a.mn = nan_min(a.mn, b.mn);
    a.mx = nan_max(a.mx, b.mx);
    if (HAS_M) {
        a.mzz += b.mzz;
        a.mzy += b.mzy;
        a.mzx += b.mzx;
        a.myy += b.myy;
        a.myx += b.myx;
        a.mxx += b.mxx;
        a.s2 += b.s2;
    }
}

// every lane calls it (shuffles): lane `src`'s accumulator, everywhere
template <bool HAS_I, bool HAS_M>
__device__ __forceinline__ Acc acc_shfl(const Acc& a, int src) {
    Acc r;
    r.c = __shfl_sync(FULL_MASK, a.c, src);
    r.sz = __shfl_sync(FULL_MASK, a.sz, src);
    r.sy = __shfl_sync(FULL_MASK, a.sy, src);
    r.sx = __shfl_sync(FULL_MASK, a.sx, src);
    r.lz = __shfl_sync(FULL_MASK, a.lz, src);
    r.ly = __shfl_sync(FULL_MASK, a.ly, src);
    r.lx = __shfl_sync(FULL_MASK, a.lx, src);
    r.hz = __shfl_sync(FULL_MASK, a.hz, src);
    r.hy = __shfl_sync(FULL_MASK, a.hy, src);
    r.hx = __shfl_sync(FULL_MASK, a.hx, src);
    if (HAS_I) {
        r.s = __shfl_sync(FULL_MASK, a.s, src);
        r.mn = __shfl_sync(FULL_MASK, a.mn, src);
        r.mx = __shfl_sync(FULL_MASK, a.mx, src);
    } else {
        r.s = r.mn = r.mx = 0.0;
    }
    if (HAS_M) {
        r.mzz = __shfl_sync(FULL_MASK, a.mzz, src);
        r.mzy = __shfl_sync(FULL_MASK, a.mzy, src);
        r.mzx = __shfl_sync(FULL_MASK, a.mzx, src);
        r.myy = __shfl_sync(FULL_MASK, a.myy, src);
        r.myx = __shfl_sync(FULL_MASK, a.myx, src);
        r.mxx = __shfl_sync(FULL_MASK, a.mxx, src);
        r.s2 = HAS_I ? __shfl_sync(FULL_MASK, a.s2, src) : 0.0;
    } else {
        r.mzz = r.mzy = r.mzx = r.myy = r.myx = r.mxx = 0;
        r.s2 = 0.0;
    }
    return r;
}

template <bool HAS_I, bool HAS_M>
__device__ __forceinline__ void flush(long long i, const Acc& a, long long n,
                                      unsigned long long* count, long long* csum, int* lo,
                                      int* hi, double* isum, unsigned long long* imin,
                                      unsigned long long* imax, long long* m2, double* isq) {
    atomicAdd(count + i, (unsigned long long)a.c);
    atomicAdd((unsigned long long*)(csum + i), (unsigned long long)a.sz);
    atomicAdd((unsigned long long*)(csum + n + i), (unsigned long long)a.sy);
    atomicAdd((unsigned long long*)(csum + 2 * n + i), (unsigned long long)a.sx);
    atomicMin(lo + i, a.lz);
    atomicMin(lo + n + i, a.ly);
    atomicMin(lo + 2 * n + i, a.lx);
    atomicMax(hi + i, a.hz);
    atomicMax(hi + n + i, a.hy);
    atomicMax(hi + 2 * n + i, a.hx);
    if (HAS_I) {
        atomicAdd(isum + i, a.s);
        atomicMin(imin + i, min_key(a.mn));
        atomicMax(imax + i, max_key(a.mx));
    }
    if (HAS_M) {
        const long long m[6] = {a.mzz, a.mzy, a.mzx, a.myy, a.myx, a.mxx};
        for (int k = 0; k < 6; ++k) {
            atomicAdd((unsigned long long*)(m2 + k * n + i), (unsigned long long)m[k]);
        }
        if (HAS_I) {
            atomicAdd(isq + i, a.s2);
        }
    }
}

// L: labels (D, H, W) C order, 0 = background, 1..n; I: intensity of the same shape (or unused).
// Warp w handles rows [w * rows_per_warp, (w + 1) * rows_per_warp) of the D * H rows.
template <typename T, typename V, bool HAS_I, bool HAS_M>
__global__ void label_stats(const T* __restrict__ L, const V* __restrict__ I, long long H,
                            long long W, long long rows, long long rows_per_warp, long long n,
                            unsigned long long* count, long long* csum, int* lo, int* hi,
                            double* isum, unsigned long long* imin, unsigned long long* imax,
                            long long* m2, double* isq) {
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long r0 = warp * rows_per_warp;
    const long long r1 = min(rows, r0 + rows_per_warp);

    T pend = 0;  // pending label (0: none), same in every lane
    Acc pacc;    // pending accumulator, valid in lane 0
    for (long long r = r0; r < r1; ++r) {
        const int z = (int)(r / H);
        const int y = (int)(r - (long long)z * H);
        const T* row = L + r * W;
        for (long long x0 = 0; x0 < W; x0 += 32) {
            const long long x = x0 + lane;
            const T v = x < W ? row[x] : T(0);
            double iv = 0.0;
            if (HAS_I) {
                iv = x < W ? (double)I[r * W + x] : 0.0;
            }
            const T prev = __shfl_up_sync(FULL_MASK, v, 1);
            const bool fg = v != T(0);
            const bool st = fg && (lane == 0 || prev != v);
            const unsigned fgm = __ballot_sync(FULL_MASK, fg);
            const unsigned stm = __ballot_sync(FULL_MASK, st);
            if (fgm == 0u) {
                continue;  // warp-uniform
            }
            // the run of a start lane ends before the next start or background lane
            const unsigned above = lane == 31 ? 0u : (FULL_MASK << (lane + 1));
            const unsigned stop = (stm | ~fgm) & above;
            const int e = stop ? __ffs(stop) - 1 : 32;
            double s = iv, mn = iv, mx = iv, s2 = iv * iv;
            if (HAS_I) {
                // segmented reduction: lane i ends up with [i, e_i) (a start lane: its run)
                for (int off = 1; off < 32; off <<= 1) {
                    const double so = __shfl_down_sync(FULL_MASK, s, off);
                    const double mno = __shfl_down_sync(FULL_MASK, mn, off);
                    const double mxo = __shfl_down_sync(FULL_MASK, mx, off);
                    const double s2o = HAS_M ? __shfl_down_sync(FULL_MASK, s2, off) : 0.0;
                    if (lane + off < e) {
                        s += so;
                        mn = nan_min(mn, mno);
                        mx = nan_max(mx, mxo);
                        s2 += s2o;
                    }
                }
            }
            Acc a;  // this lane's run (meaningful at start lanes)
            const long long len = e - lane;
            const int xs = (int)x, xe = (int)(x0 + e - 1);
            a.c = len;
            a.sz = (long long)z * len;
            a.sy = (long long)y * len;
            a.sx = ((long long)xs + xe) * len / 2;
            a.lz = a.hz = z;
            a.ly = a.hy = y;
            a.lx = xs;
            a.hx = xe;
            a.s = s;
            a.mn = mn;
            a.mx = mx;
            if (HAS_M) {
                a.mzz = (long long)z * z * len;
                a.mzy = (long long)z * y * len;
                a.mzx = (long long)z * a.sx;
                a.myy = (long long)y * y * len;
                a.myx = (long long)y * a.sx;
                a.mxx = squares(xe) - squares((long long)xs - 1);
                a.s2 = s2;
            }

            // the run starting at lane 0, and the run reaching lane 31
            const T v0 = __shfl_sync(FULL_MASK, v, 0);
            const int ls = (fgm >> 31) ? 31 - __clz((int)stm) : -1;
            const T vl = __shfl_sync(FULL_MASK, v, ls < 0 ? 0 : ls);
            const Acc al = acc_shfl<HAS_I, HAS_M>(a, ls < 0 ? 0 : ls);
            const bool merge0 = (fgm & 1u) && v0 == pend;
            const bool mergel = ls > 0 && vl == pend;
            const bool renew = ls >= 0 && !(ls == 0 ? merge0 : mergel);
            const bool direct =
                st && !(lane == 0 && merge0) && !(lane == ls && (mergel || renew));
            if (direct) {
                flush<HAS_I, HAS_M>((long long)v - 1, a, n, count, csum, lo, hi, isum, imin, imax,
                                    m2, isq);
            }
            if (lane == 0) {
                if (merge0) {
                    acc_add<HAS_M>(pacc, a);
                }
                if (mergel) {
                    acc_add<HAS_M>(pacc, al);
                }
                if (renew) {
                    if (pend != T(0)) {
                        flush<HAS_I, HAS_M>((long long)pend - 1, pacc, n, count, csum, lo, hi,
                                            isum, imin, imax, m2, isq);
                    }
                    pacc = al;
                }
            }
            if (renew) {
                pend = vl;
            }
        }
    }
    if (lane == 0 && pend != T(0)) {
        flush<HAS_I, HAS_M>((long long)pend - 1, pacc, n, count, csum, lo, hi, isum, imin, imax,
                            m2, isq);
    }
}
