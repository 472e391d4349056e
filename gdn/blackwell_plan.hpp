// The chunked recurrence on Blackwell (sm_100, tcgen05), as a plan: which float32 accumulators
// live in tensor memory, what each CTA stages in shared memory, and the resources the kernels
// would declare (kcv_kernel_resources), so that RES-02's static budget rules check the plan
// before a line of the kernels exists (tests/cpp/test_gates_exact.cpp, docs/gdn.md).
//
// Tensor memory is 128 lanes x 512 columns of 32 bits per SM, allocated per CTA in powers of two
// of at least 32 columns. A 64-token tile takes 64 lanes and its width in columns; the state is
// K = 128 lanes wide. K = V = 128, chunks of C = 64 tokens, bf16 operands.
#pragma once

#include <cstdint>
#include <span>

#include "kcv/kcv_kernel.h"

namespace kcv::gdn::blackwell {

inline constexpr int kChunk = 64, kK = 128, kV = 128;
inline constexpr int kTmemColumnsPerSm = 512;

struct TmemTile {
    const char* what;
    int lanes, columns;   // 32-bit columns
};

struct SmemBuffer {
    const char* what;
    int64_t bytes;
};

struct KernelPlan {
    std::span<const TmemTile> tiles;
    std::span<const SmemBuffer> buffers;
    int threads;                // one producer warpgroup (TMA, tcgen05.mma issue) + two consumers
    int registers_per_thread;   // the most 65,536 registers allow at that many threads, rounded down to 8
};

constexpr int64_t bf16_tile(int rows, int cols) { return int64_t{2} * rows * cols; }
constexpr int64_t f32_tile(int rows, int cols) { return int64_t{4} * rows * cols; }

// Forward: the state stays resident; the chunk's tiles pass through it in turn.
inline constexpr TmemTile kForwardTiles[] = {
    {"state S (K x V)", kK, kV},
    {"delta = U - W S (C x V)", kChunk, kV},
    {"output O (C x V)", kChunk, kV},
    {"scores P, then the delta system A (C x C)", kChunk, kChunk},
};
inline constexpr SmemBuffer kForwardBuffers[] = {
    {"q, k, v chunk tiles, two TMA stages", 2 * 3 * bf16_tile(kChunk, kK)},
    {"w, u of the chunk (bf16 operands of the state update)", 2 * bf16_tile(kChunk, kK)},
    {"S as a bf16 operand", bf16_tile(kK, kV)},
    {"channel gates g of the chunk", f32_tile(kChunk, kK)},
};

// Backward: dS resident; one C x K gradient tile reused for dq, dk, dw in turn.
inline constexpr TmemTile kBackwardTiles[] = {
    {"state gradient dS (K x V)", kK, kV},
    {"d delta (C x V)", kChunk, kV},
    {"gradient tile dq / dk / dw (C x K), reused", kChunk, kK},
    {"dP, then dA (C x C)", kChunk, kChunk},
};
inline constexpr SmemBuffer kBackwardBuffers[] = {
    {"q, k, v, do chunk tiles, two TMA stages", 2 * 4 * bf16_tile(kChunk, kK)},
    {"S of the chunk as a bf16 operand (recomputed forward)", bf16_tile(kK, kV)},
    {"channel gates g of the chunk", f32_tile(kChunk, kK)},
};

inline constexpr KernelPlan kForward{kForwardTiles, kForwardBuffers, 384, 168};
inline constexpr KernelPlan kBackward{kBackwardTiles, kBackwardBuffers, 384, 168};

constexpr int tmem_columns_used(const KernelPlan& p) {
    int n = 0;
    for (const TmemTile& t : p.tiles) n += t.columns;
    return n;
}

// tcgen05.alloc takes a power of two of at least 32 columns.
constexpr int tmem_allocation(int columns) {
    int a = 32;
    while (a < columns) a *= 2;
    return a;
}

constexpr int64_t smem_bytes(const KernelPlan& p) {
    int64_t n = 0;
    for (const SmemBuffer& b : p.buffers) n += b.bytes;
    return n;
}

// What the kernel's kcv_kernel_resources would report.
constexpr kcv_resources resources(const KernelPlan& p) {
    return {p.registers_per_thread, p.threads, 0, smem_bytes(p), 0, tmem_allocation(tmem_columns_used(p))};
}

}  // namespace kcv::gdn::blackwell
