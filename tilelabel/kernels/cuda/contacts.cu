// The contacts of a labeled chunk among its own labels (the device side of Backend.contacts):
// for every voxel pair p, q = p + s, s one of the connectivity's forward offsets, whose labels
// differ and are both nonzero, one more contact of the pair (min, max) in the offset's class (a
// face along an axis, or an edge or corner).
//
// ct_count: a block takes a tile of tz x ty x tx voxels, a warp 32 voxels of a row at a time, and
// per offset adds each run of one pair along the lanes at once to a table of the block's own in
// shared memory; at the tile's end its pairs go to an open-addressing hash table in global memory
// (keys[cap]: lo << 32 | hi, 0 empty; counts[cap][4]: per class), claimed with atomicCAS and
// probed linearly, so that the global atomics are a few per pair and tile instead of one per
// run of voxels. state[0] counts the keys claimed; past
// `limit` (70% of the table) or with a label of 32 bits or more (no key packs it), state[1] is
// set and the host starts again with a larger table, or on the host. ct_compact: the filled
// slots packed into (m, 2) pairs and (m, ncls) counts, in no order.
#include "common.cuh"

#define GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

__device__ __forceinline__ u64 slot_of(u64 key, u32 shift) {
    return (key * 0x9E3779B97F4A7C15ULL) >> shift;
}

// The global slot of `key`, claimed if new; -1 where the table is full.
__device__ __forceinline__ i64 slot_for(u64 key, u64* __restrict__ keys, u64 mask, u32 shift,
                                        u64* state, u64 limit) {
    u64 h = slot_of(key, shift);
    for (u64 probe = 0; probe <= mask; ++probe) {
        // a claimed slot keeps its key: only an empty one needs the CAS
        const u64 seen = *(volatile u64*)&keys[h];
        const u64 prev = seen ? seen : atomicCAS(&keys[h], 0ULL, key);
        if (prev == 0ULL) {
            if (atomicAdd(&state[0], 1ULL) >= limit) state[1] = 1;
        }
        if (prev == 0ULL || prev == key) return (i64)h;
        h = (h + 1) & mask;
    }
    state[1] = 1;  // the table is full
    return -1;
}

__device__ __forceinline__ void add_contact(u64 key, int cls, u64 n, u64* __restrict__ keys,
                                            u64* __restrict__ counts, u64 mask, u32 shift,
                                            u64* state, u64 limit) {
    const i64 h = slot_for(key, keys, mask, shift, state, limit);
    if (h >= 0) atomicAdd(&counts[h * 4 + cls], n);
}

// Shared-memory table of a block: SLOTS keys and a u32 count per class; a key not placed within
// PROBES probes goes straight to the global table.
#define SLOTS 1024
#define PROBES 16
#define FULL 0xffffffffu

template <typename T>
__global__ void __launch_bounds__(256)
ct_count(const T* __restrict__ L, i64 D, i64 H, i64 W, const i64* __restrict__ offs,
         const int* __restrict__ cls, int k, int tz, int ty, int tx, u64* __restrict__ keys,
         u64* __restrict__ counts, u64 mask, u32 shift, u64* state, u64 limit) {
    __shared__ u64 skeys[SLOTS];
    __shared__ u32 scounts[SLOTS * 4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const i64 nz = (D + tz - 1) / tz, ny = (H + ty - 1) / ty, nx = (W + tx - 1) / tx;
    for (int i = threadIdx.x; i < SLOTS; i += blockDim.x) skeys[i] = 0;
    for (int i = threadIdx.x; i < SLOTS * 4; i += blockDim.x) scounts[i] = 0;
    __syncthreads();
    for (i64 tile = blockIdx.x; tile < nz * ny * nx; tile += gridDim.x) {
        const i64 z0 = tile / (ny * nx) * tz, y0 = tile / nx % ny * ty, x0 = tile % nx * tx;
        // a warp takes 32 voxels of a row at a time; lanes beyond the image hold no pair
        for (int seg = warp; seg < tz * ty * (tx / 32); seg += warps) {
            const int r = seg / (tx / 32);
            const i64 z = z0 + r / ty, y = y0 + r % ty, x = x0 + (seg % (tx / 32)) * 32 + lane;
            const bool inside = z < D && y < H && x < W;
            const T a = inside ? L[(z * H + y) * W + x] : (T)0;
            for (int j = 0; j < k; ++j) {
                const i64 zz = z + offs[3 * j], yy = y + offs[3 * j + 1], xx = x + offs[3 * j + 2];
                const bool inb = a != 0 && zz >= 0 && zz < D && yy >= 0 && yy < H && xx >= 0 &&
                                 xx < W;
                const T b = inb ? L[(zz * H + yy) * W + xx] : (T)0;
                u64 key = 0;
                if (a != b && b != 0) {
                    const u64 lo = a < b ? (u64)a : (u64)b, hi = a < b ? (u64)b : (u64)a;
                    if (hi >> 32)
                        state[1] = 2;  // no key packs it: the host counts these
                    else
                        key = (lo << 32) | hi;
                }
                // runs of one key along the warp's lanes: the run's first lane adds them all
                const u64 before = __shfl_up_sync(FULL, key, 1);
                const u32 starts = __ballot_sync(FULL, lane == 0 || before != key);
                if (key == 0 || (lane > 0 && before == key)) continue;
                const u32 later = starts & ~(0xffffffffu >> (31 - lane));
                const u32 n = (later ? __ffs(later) - 1 : 32) - lane;
                u32 h = (u32)((key * 0x9E3779B97F4A7C15ULL) >> 54);
                int probe = 0;
                for (; probe < PROBES; ++probe, h = (h + 1) & (SLOTS - 1)) {
                    const u64 prev = atomicCAS(&skeys[h], 0ULL, key);
                    if (prev == 0ULL || prev == key) {
                        atomicAdd(&scounts[h * 4 + cls[j]], n);
                        break;
                    }
                }
                if (probe == PROBES) add_contact(key, cls[j], n, keys, counts, mask, shift, state, limit);
            }
        }
        __syncthreads();
        // the tile's pairs into the global table, and the shared one emptied for the next
        for (int i = threadIdx.x; i < SLOTS; i += blockDim.x) {
            const u64 key = skeys[i];
            if (!key) continue;
            const i64 h = slot_for(key, keys, mask, shift, state, limit);
            for (int c = 0; c < 4; ++c) {
                const u32 n = scounts[i * 4 + c];
                if (n && h >= 0) atomicAdd(&counts[h * 4 + c], (u64)n);
                scounts[i * 4 + c] = 0;
            }
            skeys[i] = 0;
        }
        __syncthreads();
    }
}

__global__ void ct_compact(const u64* __restrict__ keys, const u64* __restrict__ counts, i64 cap,
                           int ncls, u64* __restrict__ out_pairs, u64* __restrict__ out_counts,
                           u64* state) {
    GRID_STRIDE(i, cap) {
        const u64 key = keys[i];
        if (key) {
            const u64 j = atomicAdd(&state[2], 1ULL);
            out_pairs[2 * j] = key >> 32;
            out_pairs[2 * j + 1] = key & 0xffffffffULL;
            for (int c = 0; c < ncls; ++c) out_counts[j * ncls + c] = counts[i * 4 + c];
        }
    }
}
