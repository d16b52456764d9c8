// The contacts of a labeled chunk among its own labels (the device side of Backend.contacts):
// for every voxel pair p, q = p + s, s one of the connectivity's forward offsets, whose labels
// differ and are both nonzero, one more contact of the pair (min, max) in the offset's class (a
// face along an axis, or an edge or corner).
//
// ct_count: a thread walks SEG voxels of a row per offset and adds each run of one pair at once
// to an open-addressing hash table (keys[cap]: lo << 32 | hi, 0 empty; counts[cap][4]: per
// class), claimed with atomicCAS and probed linearly. state[0] counts the keys claimed; past
// `limit` (70% of the table) or with a label of 32 bits or more (no key packs it), state[1] is
// set and the host starts again with a larger table, or on the host. ct_compact: the filled
// slots packed into key and count arrays, in no order (the host sorts them).
#include "common.cuh"

#define GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

#define SEG 16

__device__ __forceinline__ u64 slot_of(u64 key, u32 shift) {
    return (key * 0x9E3779B97F4A7C15ULL) >> shift;
}

__device__ __forceinline__ void add_contact(u64 key, int cls, u64 n, u64* __restrict__ keys,
                                            u64* __restrict__ counts, u64 mask, u32 shift,
                                            u64* state, u64 limit) {
    u64 h = slot_of(key, shift);
    for (u64 probe = 0; probe <= mask; ++probe) {
        u64 prev = atomicCAS(&keys[h], 0ULL, key);
        if (prev == 0ULL) {
            if (atomicAdd(&state[0], 1ULL) >= limit) state[1] = 1;
        }
        if (prev == 0ULL || prev == key) {
            atomicAdd(&counts[h * 4 + cls], n);
            return;
        }
        h = (h + 1) & mask;
    }
    state[1] = 1;  // the table is full
}

template <typename T>
__global__ void ct_count(const T* __restrict__ L, i64 D, i64 H, i64 W,
                         const i64* __restrict__ offs, const int* __restrict__ cls, int k,
                         u64* __restrict__ keys, u64* __restrict__ counts, u64 mask, u32 shift,
                         u64* state, u64 limit) {
    const i64 segs = (W + SEG - 1) / SEG;
    GRID_STRIDE(s, D * H * segs) {
        const i64 row = s / segs, x0 = (s % segs) * SEG;
        const i64 z = row / H, y = row % H;
        const i64 x1 = x0 + SEG < W ? x0 + SEG : W;
        const T* a_row = L + row * W;
        for (int j = 0; j < k; ++j) {
            const i64 zz = z + offs[3 * j], yy = y + offs[3 * j + 1], dx = offs[3 * j + 2];
            if (zz < 0 || zz >= D || yy < 0 || yy >= H) continue;
            const T* b_row = L + (zz * H + yy) * W;
            u64 cur = 0, n = 0;
            for (i64 x = x0; x < x1; ++x) {
                const i64 xx = x + dx;
                const T a = a_row[x];
                const T b = (xx >= 0 && xx < W) ? b_row[xx] : (T)0;
                u64 key = 0;
                if (a != b && a != 0 && b != 0) {
                    const u64 lo = a < b ? (u64)a : (u64)b, hi = a < b ? (u64)b : (u64)a;
                    if (hi >> 32) {
                        state[1] = 2;  // no key packs it: the host counts these
                        return;
                    }
                    key = (lo << 32) | hi;
                }
                if (key != cur) {
                    if (cur) add_contact(cur, cls[j], n, keys, counts, mask, shift, state, limit);
                    cur = key;
                    n = 0;
                }
                n += key != 0;
            }
            if (cur) add_contact(cur, cls[j], n, keys, counts, mask, shift, state, limit);
        }
    }
}

__global__ void ct_compact(const u64* __restrict__ keys, const u64* __restrict__ counts, i64 cap,
                           u64* __restrict__ out_keys, u64* __restrict__ out_counts, u64* state) {
    GRID_STRIDE(i, cap) {
        const u64 key = keys[i];
        if (key) {
            const u64 j = atomicAdd(&state[2], 1ULL);
            out_keys[j] = key;
            for (int c = 0; c < 4; ++c) out_counts[j * 4 + c] = counts[i * 4 + c];
        }
    }
}
