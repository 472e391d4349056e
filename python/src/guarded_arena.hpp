// A guarded, poisoning allocator over device memory it does not know the kind of. Every block
// sits between two guard bands (4 KiB by default) filled with a guard poison; a fresh block is
// filled with the fill poison, so an output a kernel never writes is visibly not a result; a
// freed block is filled with the freed poison and held in a quarantine before it is really
// released, so a kernel reading or writing a freed buffer (a reference's output that someone
// freed, say) sees poison and leaves traces. Every allocation is recorded with a serial number.
//
// The CUDA build (guarded_allocator.cpp) plugs this into PyTorch's pluggable allocator with the
// driver API as its DeviceMemory; the Python module binds it over host memory so its logic is
// tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/buffer.hpp"

namespace kcv::py {

// The memory operations the arena needs. `stream` orders a fill after the work already queued
// on it; read is synchronous.
class DeviceMemory {
public:
    virtual ~DeviceMemory() = default;
    virtual void* allocate(size_t bytes) = 0;   // nullptr when out of memory
    virtual void release(void* p) = 0;
    virtual void fill(void* p, uint8_t byte, size_t bytes, void* stream) = 0;
    virtual void write(void* dst, const uint8_t* src, size_t bytes, void* stream) = 0;
    virtual void read(uint8_t* dst, const void* src, size_t bytes) = 0;
};

// Host memory: the arena's logic without a device.
class HostMemory final : public DeviceMemory {
public:
    void* allocate(size_t bytes) override;
    void release(void* p) override;
    void fill(void* p, uint8_t byte, size_t bytes, void* stream) override;
    void write(void* dst, const uint8_t* src, size_t bytes, void* stream) override;
    void read(uint8_t* dst, const void* src, size_t bytes) override;
};

struct ArenaConfig {
    size_t guard_bytes = 4096;
    size_t quarantine_bytes = size_t(256) << 20;   // freed bytes held back before release
};

struct BlockInfo {
    uint64_t serial = 0;   // allocation order, from 1
    uintptr_t data = 0;
    size_t bytes = 0;
    int device = 0;
    bool freed = false;    // in the quarantine
};

struct BandDamage {
    BlockInfo block;
    enum class Where : uint8_t { before, after, freed_data } where = Where::before;
    size_t first_offset = 0;   // within the band (or the freed block's data)
    size_t bytes_changed = 0;
};

class GuardedArena {
public:
    GuardedArena(DeviceMemory& mem, ArenaConfig cfg = {});
    ~GuardedArena();
    GuardedArena(const GuardedArena&) = delete;
    GuardedArena& operator=(const GuardedArena&) = delete;

    void* allocate(size_t bytes, int device, void* stream);   // nullptr when out of memory
    void release(void* data, void* stream);                  // unknown pointers are ignored

    void set_fill_poison(Poison p);    // for blocks allocated from now on
    void set_guard_poison(Poison p);   // for blocks allocated from now on
    void set_freed_poison(Poison p);   // for blocks freed from now on

    std::vector<BlockInfo> blocks(bool with_freed) const;
    // Guard bands of live and quarantined blocks, and the data of quarantined blocks.
    std::vector<BandDamage> check() const;
    // Refills a live block's data; false when `data` is no live block.
    bool repoison(uintptr_t data, Poison p, void* stream);
    // Refills every band with the current guard poison, making earlier damage history.
    void repoison_guards(void* stream);
    // Releases the quarantine now.
    void drain();
    uint64_t allocations() const;   // serial of the latest block

private:
    struct Block {
        uint8_t* base = nullptr;
        BlockInfo info;
        Poison guard, freed;
    };
    void fill(uint8_t* p, size_t bytes, const Poison& poison, void* stream);
    void compare(const uint8_t* p, size_t bytes, const Poison& poison, const Block& b, BandDamage::Where where,
                 std::vector<BandDamage>& out) const;
    void evict_locked();

    DeviceMemory& mem_;
    ArenaConfig cfg_;
    mutable std::mutex mu_;
    std::map<uintptr_t, Block> live_;
    std::deque<Block> quarantine_;
    size_t quarantined_bytes_ = 0;
    uint64_t serial_ = 0;
    Poison fill_ = Poison::bytes(0xFF), guard_ = Poison::bytes(0xA5), freed_ = Poison::bytes(0xDB);
};

// JSON forms shared by the Python binding and the CUDA library's C API.
nlohmann::json to_json(const BlockInfo& b);
nlohmann::json to_json(const BandDamage& d);
nlohmann::json blocks_json(const GuardedArena& a, bool with_freed);
nlohmann::json check_json(const GuardedArena& a);
// {"byte": 165} or {"random": seed}, as probes write poisons.
Poison poison_from_json(const nlohmann::json& j);

}  // namespace kcv::py
