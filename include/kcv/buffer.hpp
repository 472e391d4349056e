// Guarded, poisonable host memory. Every buffer the verifier hands a candidate sits between two
// guard bands (at least 4 KiB each) holding a known poison; after a call the guards are checked
// byte by byte (RES-01) and the interior can be re-poisoned between runs (ORD-02).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kcv {

struct Poison {
    enum class Kind : uint8_t { byte, random } kind = Kind::byte;
    uint8_t byte = 0xA5;   // for Kind::byte
    uint64_t seed = 0;     // for Kind::random: a pure function of (seed, offset)
    static Poison bytes(uint8_t b) { return {Kind::byte, b, 0}; }
    static Poison random(uint64_t seed) { return {Kind::random, 0, seed}; }
    // The poison byte expected at this offset: of the interior for poison(), of the whole
    // allocation (from the start of the band before the data) for the guards.
    uint8_t at(size_t offset) const;
};

// Writes the poison over p[0, n), p[0] standing at `first_offset` of the poisoned region.
void poison_fill(uint8_t* p, size_t n, const Poison& poison, size_t first_offset);

// Where p[0, n) differs from the poison (p[0] at `first_offset`): the first differing byte
// (relative to p) and how many differ. Compares eight bytes at a time where nothing changed, so
// a check of a large intact region costs about a memory read.
struct PoisonDiff {
    size_t first = 0;
    size_t count = 0;
};
PoisonDiff poison_diff(const uint8_t* p, size_t n, const Poison& poison, size_t first_offset);

struct GuardDamage {
    bool before;           // the band before the data (else after)
    size_t first_offset;   // offset within that band of the first changed byte
    size_t bytes_changed;
};

class GuardedBuffer {
public:
    static constexpr size_t kDefaultGuard = 4096;
    // The interior starts zeroed; guard_bytes is raised to at least kDefaultGuard and to a
    // multiple of 64. The band after the data starts at data() + size().
    explicit GuardedBuffer(size_t bytes, size_t guard_bytes = kDefaultGuard,
                           Poison guard_poison = Poison::bytes(0xA5));
    GuardedBuffer(const GuardedBuffer&) = delete;
    GuardedBuffer& operator=(const GuardedBuffer&) = delete;
    ~GuardedBuffer();

    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return bytes_; }
    size_t guard_size() const { return guard_; }
    const Poison& guard_poison() const { return guard_poison_; }

    void poison(Poison p);                 // fills the interior
    void poison_guards(Poison p);          // refills both guard bands and remembers p
    std::vector<GuardDamage> check_guards() const;  // empty when both are intact

private:
    uint8_t* base_ = nullptr;   // page-aligned allocation: [guard][data][guard]
    uint8_t* data_ = nullptr;   // 64-byte aligned
    size_t bytes_ = 0, guard_ = 0, total_ = 0;
    Poison guard_poison_;
};

}  // namespace kcv
