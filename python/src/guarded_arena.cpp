#include "guarded_arena.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kcv::py {

void* HostMemory::allocate(size_t bytes) { return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096); }
void HostMemory::release(void* p) { std::free(p); }
void HostMemory::fill(void* p, uint8_t byte, size_t bytes, void*) { std::memset(p, byte, bytes); }
void HostMemory::write(void* dst, const uint8_t* src, size_t bytes, void*) { std::memcpy(dst, src, bytes); }
void HostMemory::read(uint8_t* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

GuardedArena::GuardedArena(DeviceMemory& mem, ArenaConfig cfg) : mem_(mem), cfg_(cfg) {}

GuardedArena::~GuardedArena() {
    drain();
    for (auto& [data, b] : live_) mem_.release(b.base);
}

// Random poisons are generated on the host in chunks, each byte a function of its offset.
void GuardedArena::fill(uint8_t* p, size_t bytes, const Poison& poison, void* stream) {
    if (poison.kind == Poison::Kind::byte) {
        mem_.fill(p, poison.byte, bytes, stream);
        return;
    }
    constexpr size_t kChunk = size_t(1) << 20;
    std::vector<uint8_t> chunk(std::min(bytes, kChunk));
    for (size_t done = 0; done < bytes; done += chunk.size()) {
        const size_t n = std::min(chunk.size(), bytes - done);
        poison_fill(chunk.data(), n, poison, done);
        mem_.write(p + done, chunk.data(), n, stream);
    }
}

void* GuardedArena::allocate(size_t bytes, int device, void* stream) {
    const size_t g = cfg_.guard_bytes;
    auto* base = static_cast<uint8_t*>(mem_.allocate(bytes + 2 * g));
    if (!base) {
        // Memory held in the quarantine is the first to give back.
        drain();
        base = static_cast<uint8_t*>(mem_.allocate(bytes + 2 * g));
        if (!base) return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Block b;
    b.base = base;
    b.info.serial = ++serial_;
    b.info.data = reinterpret_cast<uintptr_t>(base + g);
    b.info.bytes = bytes;
    b.info.device = device;
    b.guard = guard_;
    fill(base, g, guard_, stream);
    fill(base + g, bytes, fill_, stream);
    fill(base + g + bytes, g, guard_, stream);
    live_[b.info.data] = b;
    return base + g;
}

void GuardedArena::release(void* data, void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(data));
    if (it == live_.end()) return;
    Block b = it->second;
    live_.erase(it);
    b.info.freed = true;
    b.freed = freed_;
    fill(b.base + cfg_.guard_bytes, b.info.bytes, freed_, stream);
    quarantined_bytes_ += b.info.bytes + 2 * cfg_.guard_bytes;
    quarantine_.push_back(b);
    evict_locked();
}

void GuardedArena::evict_locked() {
    while (quarantined_bytes_ > cfg_.quarantine_bytes && !quarantine_.empty()) {
        const Block& b = quarantine_.front();
        quarantined_bytes_ -= b.info.bytes + 2 * cfg_.guard_bytes;
        mem_.release(b.base);
        quarantine_.pop_front();
    }
}

void GuardedArena::drain() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Block& b : quarantine_) mem_.release(b.base);
    quarantine_.clear();
    quarantined_bytes_ = 0;
}

void GuardedArena::set_fill_poison(Poison p) {
    std::lock_guard<std::mutex> lock(mu_);
    fill_ = p;
}
void GuardedArena::set_guard_poison(Poison p) {
    std::lock_guard<std::mutex> lock(mu_);
    guard_ = p;
}
void GuardedArena::set_freed_poison(Poison p) {
    std::lock_guard<std::mutex> lock(mu_);
    freed_ = p;
}

std::vector<BlockInfo> GuardedArena::blocks(bool with_freed) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<BlockInfo> out;
    for (const auto& [data, b] : live_) out.push_back(b.info);
    if (with_freed)
        for (const Block& b : quarantine_) out.push_back(b.info);
    std::sort(out.begin(), out.end(), [](const BlockInfo& a, const BlockInfo& b) { return a.serial < b.serial; });
    return out;
}

void GuardedArena::compare(const uint8_t* p, size_t bytes, const Poison& poison, const Block& b,
                           BandDamage::Where where, std::vector<BandDamage>& out) const {
    std::vector<uint8_t> host(bytes);
    mem_.read(host.data(), p, bytes);
    const PoisonDiff diff = poison_diff(host.data(), bytes, poison, 0);
    if (diff.count == 0) return;
    BandDamage d;
    d.block = b.info;
    d.where = where;
    d.first_offset = diff.first;
    d.bytes_changed = diff.count;
    out.push_back(d);
}

std::vector<BandDamage> GuardedArena::check() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<BandDamage> out;
    const size_t g = cfg_.guard_bytes;
    auto bands = [&](const Block& b) {
        compare(b.base, g, b.guard, b, BandDamage::Where::before, out);
        compare(b.base + g + b.info.bytes, g, b.guard, b, BandDamage::Where::after, out);
    };
    for (const auto& [data, b] : live_) bands(b);
    for (const Block& b : quarantine_) {
        bands(b);
        compare(b.base + g, b.info.bytes, b.freed, b, BandDamage::Where::freed_data, out);
    }
    std::sort(out.begin(), out.end(),
              [](const BandDamage& a, const BandDamage& b) { return a.block.serial < b.block.serial; });
    return out;
}

bool GuardedArena::repoison(uintptr_t data, Poison p, void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(data);
    if (it == live_.end()) return false;
    fill(it->second.base + cfg_.guard_bytes, it->second.info.bytes, p, stream);
    return true;
}

void GuardedArena::repoison_guards(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t g = cfg_.guard_bytes;
    auto refill = [&](Block& b) {
        b.guard = guard_;
        fill(b.base, g, guard_, stream);
        fill(b.base + g + b.info.bytes, g, guard_, stream);
    };
    for (auto& [data, b] : live_) refill(b);
    for (Block& b : quarantine_) {
        refill(b);
        fill(b.base + g, b.info.bytes, b.freed, stream);
    }
}

uint64_t GuardedArena::allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return serial_;
}

nlohmann::json to_json(const BlockInfo& b) {
    return {{"serial", b.serial}, {"data", b.data}, {"bytes", b.bytes}, {"device", b.device}, {"freed", b.freed}};
}

nlohmann::json to_json(const BandDamage& d) {
    const char* where = d.where == BandDamage::Where::before  ? "before"
                        : d.where == BandDamage::Where::after ? "after"
                                                              : "freed-data";
    return {{"block", to_json(d.block)}, {"where", where}, {"first_offset", d.first_offset},
            {"bytes_changed", d.bytes_changed}};
}

nlohmann::json blocks_json(const GuardedArena& a, bool with_freed) {
    nlohmann::json out = nlohmann::json::array();
    for (const BlockInfo& b : a.blocks(with_freed)) out.push_back(to_json(b));
    return out;
}

nlohmann::json check_json(const GuardedArena& a) {
    nlohmann::json out = nlohmann::json::array();
    for (const BandDamage& d : a.check()) out.push_back(to_json(d));
    return out;
}

Poison poison_from_json(const nlohmann::json& j) {
    if (j.contains("random")) return Poison::random(j["random"].get<uint64_t>());
    return Poison::bytes(j.value("byte", uint8_t(0xA5)));
}

}  // namespace kcv::py
