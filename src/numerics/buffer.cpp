// Guarded host buffers: [guard][data][guard] in one page-aligned allocation. The band after the
// data starts at the first byte past the data, so a write one byte out of bounds lands in it.
#include "kcv/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>

namespace kcv {
namespace {

constexpr size_t kDataAlign = 64;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t page_size() {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? size_t(p) : 4096;
}

// splitmix64's finaliser: a bijective mix, so every 8-byte word of a random poison differs
// from its neighbours and from the same word under another seed.
uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The random poison's 8-byte word that holds byte `offset`; byte offset % 8 of it, little end
// first, is the poison there.
uint64_t random_word(uint64_t seed, size_t offset) { return mix64(seed ^ mix64(offset / 8)); }

GuardDamage compare(const uint8_t* p, size_t n, const Poison& poison, size_t first_offset, bool before) {
    const PoisonDiff d = poison_diff(p, n, poison, first_offset);
    return GuardDamage{before, d.count ? d.first : 0, d.count};
}

}  // namespace

void poison_fill(uint8_t* p, size_t n, const Poison& poison, size_t first_offset) {
    if (n == 0) return;   // p may be null then, which memset does not allow
    if (poison.kind == Poison::Kind::byte) {
        std::memset(p, poison.byte, n);
        return;
    }
    // One mixed word per 8 bytes, as Poison::at computes it.
    uint64_t word = 0;
    for (size_t i = 0; i < n; ++i) {
        const size_t off = first_offset + i;
        if (i == 0 || off % 8 == 0) word = random_word(poison.seed, off);
        p[i] = uint8_t(word >> (8 * (off % 8)));
    }
}

PoisonDiff poison_diff(const uint8_t* p, size_t n, const Poison& poison, size_t first_offset) {
    PoisonDiff d;
    auto note = [&](size_t i) {
        if (d.count++ == 0) d.first = i;
    };
    size_t i = 0;
    // Byte by byte up to the first offset that starts a poison word, and past the last whole one.
    for (; i < n && (first_offset + i) % 8 != 0; ++i)
        if (p[i] != poison.at(first_offset + i)) note(i);
    uint8_t expect[8];
    if (poison.kind == Poison::Kind::byte) std::memset(expect, poison.byte, 8);
    for (; i + 8 <= n; i += 8) {
        if (poison.kind == Poison::Kind::random) {
            const uint64_t word = random_word(poison.seed, first_offset + i);
            for (size_t j = 0; j < 8; ++j) expect[j] = uint8_t(word >> (8 * j));
        }
        if (std::memcmp(p + i, expect, 8) == 0) continue;
        for (size_t j = 0; j < 8; ++j)
            if (p[i + j] != expect[j]) note(i + j);
    }
    for (; i < n; ++i)
        if (p[i] != poison.at(first_offset + i)) note(i);
    return d;
}

uint8_t Poison::at(size_t offset) const {
    if (kind == Kind::byte) return byte;
    return uint8_t(random_word(seed, offset) >> (8 * (offset % 8)));
}

GuardedBuffer::GuardedBuffer(size_t bytes, size_t guard_bytes, Poison guard_poison)
    : bytes_(bytes), guard_(round_up(guard_bytes < kDefaultGuard ? kDefaultGuard : guard_bytes, kDataAlign)),
      guard_poison_(guard_poison) {
    const size_t page = page_size();
    total_ = round_up(guard_ + bytes_ + guard_, page);
    void* p = nullptr;
    if (posix_memalign(&p, page, total_) != 0) throw std::bad_alloc();
    base_ = static_cast<uint8_t*>(p);
    data_ = base_ + guard_;
    std::memset(data_, 0, bytes_);
    // The slack past the second band (page rounding) is not checked but is kept defined.
    std::memset(data_ + bytes_ + guard_, 0, total_ - (guard_ + bytes_ + guard_));
    poison_guards(guard_poison_);
}

GuardedBuffer::~GuardedBuffer() { std::free(base_); }

void GuardedBuffer::poison(Poison p) { poison_fill(data_, bytes_, p, 0); }

// Band offsets are counted from the start of the allocation, so a random poison differs
// between the two bands.
void GuardedBuffer::poison_guards(Poison p) {
    guard_poison_ = p;
    poison_fill(base_, guard_, p, 0);
    poison_fill(data_ + bytes_, guard_, p, guard_ + bytes_);
}

std::vector<GuardDamage> GuardedBuffer::check_guards() const {
    std::vector<GuardDamage> out;
    GuardDamage b = compare(base_, guard_, guard_poison_, 0, true);
    if (b.bytes_changed) out.push_back(b);
    GuardDamage a = compare(data_ + bytes_, guard_, guard_poison_, guard_ + bytes_, false);
    if (a.bytes_changed) out.push_back(a);
    return out;
}

}  // namespace kcv
