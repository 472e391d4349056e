// Guard bands catch every out-of-bounds byte, on either side, and nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>
#include <unistd.h>

#include "kcv/buffer.hpp"

namespace kcv {
namespace {

TEST(Buffer, AlignmentAndGuardSize) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{4095}, size_t{4096}, size_t{100003}}) {
        for (size_t guard : {size_t{16}, size_t{4096}, size_t{5000}, size_t{8192}}) {
            GuardedBuffer b(bytes, guard);
            EXPECT_EQ(b.size(), bytes);
            EXPECT_GE(b.guard_size(), size_t{4096});
            EXPECT_GE(b.guard_size(), guard);
            EXPECT_EQ(b.guard_size() % 64, 0u);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes << " " << guard;
            EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data() - b.guard_size()) % page, 0u) << "allocation is page-aligned";
            EXPECT_TRUE(b.check_guards().empty());
            for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b.data()[i], 0) << "the interior starts zeroed";
        }
    }
}

TEST(Buffer, OneByteOutOfBoundsOnEitherSide) {
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096}}) {
        GuardedBuffer b(bytes);
        b.data()[bytes] ^= 1;   // first byte past the end
        auto d = b.check_guards();
        ASSERT_EQ(d.size(), 1u) << bytes;
        EXPECT_FALSE(d[0].before);
        EXPECT_EQ(d[0].first_offset, 0u);
        EXPECT_EQ(d[0].bytes_changed, 1u);
        b.data()[bytes] ^= 1;
        EXPECT_TRUE(b.check_guards().empty());

        b.data()[-1] = 0;   // last byte before the start
        d = b.check_guards();
        ASSERT_EQ(d.size(), 1u);
        EXPECT_TRUE(d[0].before);
        EXPECT_EQ(d[0].first_offset, b.guard_size() - 1);
        EXPECT_EQ(d[0].bytes_changed, 1u);
    }
}

TEST(Buffer, DamageIsReportedPerBand) {
    GuardedBuffer b(100, 4096, Poison::bytes(0x5A));
    for (int i = 10; i < 13; ++i) b.data()[100 + i] = 0;
    b.data()[100 + 4095] = 1;   // last byte of the after band
    b.data()[-4096] = 2;        // first byte of the before band
    b.data()[-4000] = 3;
    auto d = b.check_guards();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_TRUE(d[0].before);
    EXPECT_EQ(d[0].first_offset, 0u);
    EXPECT_EQ(d[0].bytes_changed, 2u);
    EXPECT_FALSE(d[1].before);
    EXPECT_EQ(d[1].first_offset, 10u);
    EXPECT_EQ(d[1].bytes_changed, 4u);
}

TEST(Buffer, InteriorWritesNeverTouchGuards) {
    GuardedBuffer b(777);
    for (size_t i = 0; i < b.size(); ++i) b.data()[i] = uint8_t(i * 31 + 7);
    EXPECT_TRUE(b.check_guards().empty());
    b.poison(Poison::bytes(0xA5));   // even the guard's own byte
    EXPECT_TRUE(b.check_guards().empty());
}

TEST(Buffer, PoisonFillsInterior) {
    GuardedBuffer b(1000);
    b.poison(Poison::bytes(0xFF));
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], 0xFF) << i;
    b.poison(Poison::random(42));
    int equal_neighbours = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        ASSERT_EQ(b.data()[i], Poison::random(42).at(i)) << i;
        if (i && b.data()[i] == b.data()[i - 1]) ++equal_neighbours;
    }
    EXPECT_LT(equal_neighbours, 20) << "random poison should look random (seed 42)";
    EXPECT_TRUE(b.check_guards().empty());
}

TEST(Buffer, RandomPoisonIsAPureFunctionOfSeedAndOffset) {
    const Poison p = Poison::random(7), q = Poison::random(8);
    int differ = 0;
    for (size_t off = 0; off < 4096; ++off) {
        ASSERT_EQ(p.at(off), Poison::random(7).at(off));
        if (p.at(off) != q.at(off)) ++differ;
    }
    EXPECT_GT(differ, 4000) << "seeds 7 and 8 should give different poisons";
    EXPECT_EQ(Poison::bytes(0x3C).at(123456), 0x3C);
    EXPECT_EQ(Poison::bytes(0x3C).at(0), 0x3C);
}

TEST(Buffer, RepoisonedGuardsAreCheckedAgainstTheNewPoison) {
    GuardedBuffer b(64, 4096, Poison::bytes(0xA5));
    b.poison_guards(Poison::random(99));
    EXPECT_EQ(b.guard_poison().kind, Poison::Kind::random);
    EXPECT_TRUE(b.check_guards().empty());
    // Writing the old poison byte is now damage (unless it matches the random byte by chance).
    const uint8_t expected = Poison::random(99).at(b.guard_size() + 64 + 5);
    b.data()[64 + 5] = uint8_t(expected ^ 0x80);
    auto d = b.check_guards();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].first_offset, 5u);
    b.poison_guards(Poison::bytes(0x00));
    EXPECT_TRUE(b.check_guards().empty());
    b.data()[-1] = 0xA5;
    EXPECT_EQ(b.check_guards().size(), 1u);
}

TEST(Buffer, RandomGuardsCatchRandomWrites) {
    const uint64_t seed = 2024;
    std::mt19937_64 gen(seed);
    for (int trial = 0; trial < 200; ++trial) {
        const size_t bytes = gen() % 5000;
        GuardedBuffer b(bytes, 4096, Poison::random(gen()));
        const bool before = gen() & 1;
        const size_t off = gen() % b.guard_size();
        uint8_t* p = before ? b.data() - b.guard_size() + off : b.data() + bytes + off;
        *p = uint8_t(~*p);
        auto d = b.check_guards();
        ASSERT_EQ(d.size(), 1u) << "seed " << seed << " trial " << trial;
        EXPECT_EQ(d[0].before, before);
        EXPECT_EQ(d[0].first_offset, off);
        EXPECT_EQ(d[0].bytes_changed, 1u);
    }
}

// The word-at-a-time comparison agrees with Poison::at byte by byte: for both kinds of poison,
// at offsets that do and do not start a poison word, with changes at the edges and inside.
TEST(Buffer, PoisonDiffMatchesBytewise) {
    std::mt19937_64 rng(7);
    for (const Poison& poison : {Poison::bytes(0xA5), Poison::random(11)}) {
        for (size_t first_offset : {size_t{0}, size_t{3}, size_t{8}, size_t{4101}}) {
            for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{13}, size_t{4096}, size_t{4099}}) {
                std::vector<uint8_t> p(n);
                poison_fill(p.data(), n, poison, first_offset);
                PoisonDiff d = poison_diff(p.data(), n, poison, first_offset);
                EXPECT_EQ(d.count, 0u) << "intact " << n << " at " << first_offset;
                if (n == 0) continue;
                std::set<size_t> changed = {0, n - 1, size_t(rng() % n), size_t(rng() % n)};
                for (size_t i : changed) p[i] = uint8_t(p[i] ^ (1u << (rng() % 8)));
                size_t first = n, count = 0;
                for (size_t i = 0; i < n; ++i)
                    if (p[i] != poison.at(first_offset + i)) {
                        first = std::min(first, i);
                        ++count;
                    }
                d = poison_diff(p.data(), n, poison, first_offset);
                EXPECT_EQ(d.count, count) << n << " at " << first_offset;
                EXPECT_EQ(count, changed.size());
                EXPECT_EQ(d.first, first);
            }
        }
    }
}

}  // namespace
}  // namespace kcv
