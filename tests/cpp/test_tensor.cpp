// Layouts, element access, hashes and the DLPack view of host tensors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include <xxhash.h>

#include "kcv/tensor.hpp"

namespace kcv {
namespace {

Layout layout(Layout::Kind k, int64_t offset = 0) {
    Layout l;
    l.kind = k;
    l.storage_offset = offset;
    return l;
}

// The digest Tensor::hash must give: XXH3 over the logical elements' bytes in logical order.
uint64_t gathered_hash(const Tensor& t) {
    const size_t sz = size_t(info(t.dtype).storage_bytes);
    std::vector<uint8_t> bytes;
    for (int64_t i = 0; i < t.numel(); ++i) {
        const uint64_t b = t.bits(i);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&b);
        bytes.insert(bytes.end(), p, p + sz);
    }
    return XXH3_64bits(bytes.data(), bytes.size());
}

TEST(Tensor, LayoutStrides) {
    const std::vector<int64_t> shape{2, 3, 4};
    Tensor c = Tensor::empty(DType::f32, shape);
    EXPECT_EQ(c.strides, (std::vector<int64_t>{12, 4, 1}));
    EXPECT_TRUE(c.contiguous());
    EXPECT_EQ(c.numel(), 24);
    EXPECT_EQ(c.buf->size(), 24u * 4);

    Tensor t = Tensor::empty(DType::f32, shape, layout(Layout::Kind::transposed));
    EXPECT_EQ(t.strides, (std::vector<int64_t>{12, 1, 3}));
    EXPECT_FALSE(t.contiguous());
    EXPECT_EQ(t.buf->size(), 24u * 4);

    Tensor s = Tensor::empty(DType::f16, shape, layout(Layout::Kind::strided, 1));
    EXPECT_EQ(s.strides, (std::vector<int64_t>{24, 8, 2}));
    EXPECT_FALSE(s.contiguous());
    EXPECT_EQ(s.offset, 1);
    EXPECT_EQ(s.buf->size(), size_t(1 + 24 + 16 + 6 + 1) * 2);

    // A vector has no second dimension to swap.
    Tensor v = Tensor::empty(DType::f32, {5}, layout(Layout::Kind::transposed));
    EXPECT_EQ(v.strides, (std::vector<int64_t>{1}));
    EXPECT_TRUE(v.contiguous());
    // Size-1 dimensions do not break contiguity.
    Tensor one = Tensor::empty(DType::f32, {3, 1}, layout(Layout::Kind::transposed));
    EXPECT_TRUE(one.contiguous());
}

TEST(Tensor, StorageIndexIsABijectionOntoTheElementSlots) {
    for (auto kind : {Layout::Kind::contiguous, Layout::Kind::transposed, Layout::Kind::strided}) {
        for (int64_t off : {0, 1, 5}) {
            Tensor t = Tensor::empty(DType::f32, {3, 4, 5}, layout(kind, off));
            std::set<int64_t> seen;
            for (int64_t i = 0; i < t.numel(); ++i) {
                const auto c = t.coords(i);
                int64_t back = 0, s = t.offset;
                for (size_t d = 0; d < c.size(); ++d) {
                    back = back * t.shape[d] + c[d];
                    s += c[d] * t.strides[d];
                }
                ASSERT_EQ(back, i);
                ASSERT_EQ(t.storage_index(i), s);
                ASSERT_GE(s, off);
                ASSERT_LT(size_t(s) * 4, t.buf->size());
                if (kind == Layout::Kind::strided) {
                    ASSERT_EQ((s - off) % 2, 0);
                }
                seen.insert(s);
            }
            EXPECT_EQ(int64_t(seen.size()), t.numel());
        }
    }
    Tensor t = Tensor::empty(DType::f32, {2, 3}, layout(Layout::Kind::transposed));
    EXPECT_EQ(t.storage_index(1), 2);   // (0, 1) is one column over: two rows down in storage
    EXPECT_EQ(t.storage_index(3), 1);   // (1, 0)
    EXPECT_THROW(t.storage_index(6), std::out_of_range);
    EXPECT_THROW(t.coords(-1), std::out_of_range);
}

TEST(Tensor, ZeroDimAndEmpty) {
    Tensor s = Tensor::empty(DType::f64, {}, layout(Layout::Kind::strided, 2));
    EXPECT_EQ(s.numel(), 1);
    EXPECT_TRUE(s.coords(0).empty());
    EXPECT_EQ(s.storage_index(0), 2);
    s.set(0, -0.0);
    EXPECT_TRUE(std::signbit(s.get(0)));
    EXPECT_EQ(s.dlpack().ndim, 0);
    EXPECT_EQ(s.buf->size(), 3u * 8);

    Tensor e = Tensor::empty(DType::f32, {3, 0, 2});
    EXPECT_EQ(e.numel(), 0);
    EXPECT_EQ(e.buf->size(), 0u);
    EXPECT_EQ(e.hash(), XXH3_64bits(nullptr, 0));
    auto [lo, hi] = e.address_range();
    EXPECT_EQ(lo, hi);
    EXPECT_EQ(e.to_f64().numel(), 0);
    EXPECT_THROW(Tensor::empty(DType::f32, {2, -1}), std::invalid_argument);
}

TEST(Tensor, SetRoundsAndTouchesOnlyItsElement) {
    for (DType t : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2,
                    DType::i64, DType::i32, DType::i16, DType::i8, DType::u8, DType::boolean}) {
        Tensor x = Tensor::empty(t, {3, 4}, layout(Layout::Kind::strided, 1), Poison::bytes(0xCD));
        const uint64_t storage_before = x.hash_storage();
        x.set(5, 3.3);
        EXPECT_EQ(x.get(5), round_to(t, 3.3)) << name(t);
        EXPECT_EQ(x.bits(5), encode(t, 3.3)) << name(t);
        // Everything else, gaps included, still holds the fill poison.
        const size_t sz = size_t(info(t).storage_bytes);
        const size_t at = size_t(x.storage_index(5)) * sz;
        for (size_t i = 0; i < x.buf->size(); ++i) {
            if (i >= at && i < at + sz) continue;
            ASSERT_EQ(x.buf->data()[i], 0xCD) << name(t) << " byte " << i;
        }
        EXPECT_NE(x.hash_storage(), storage_before) << name(t);
        EXPECT_TRUE(x.buf->check_guards().empty());
    }
    Tensor h = Tensor::empty(DType::f16, {4});
    h.set(2, 0.1);
    EXPECT_EQ(h.get(2), 0.0999755859375);
    EXPECT_EQ(h.bits(2), 0x2E66u);
    h.set_bits(1, 0x7C00);
    EXPECT_EQ(h.get(1), std::numeric_limits<double>::infinity());
    EXPECT_EQ(h.bits(0), 0u);
    Tensor tf = Tensor::empty(DType::tf32, {1});
    tf.set(0, 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
    EXPECT_EQ(tf.bits(0), 0x3F802000u);
}

TEST(Tensor, HashIsOverLogicalElements) {
    const uint64_t seed = 31337;
    std::mt19937_64 gen(seed);
    const std::vector<int64_t> shape{5, 7, 9};
    Tensor c = Tensor::empty(DType::bf16, shape);
    Tensor t = Tensor::empty(DType::bf16, shape, layout(Layout::Kind::transposed, 3), Poison::bytes(0x11));
    Tensor s = Tensor::empty(DType::bf16, shape, layout(Layout::Kind::strided, 1), Poison::bytes(0x22));
    for (int64_t i = 0; i < c.numel(); ++i) {
        const uint64_t b = gen() & 0xFFFF;
        c.set_bits(i, b);
        t.set_bits(i, b);
        s.set_bits(i, b);
    }
    EXPECT_EQ(c.hash(), gathered_hash(c)) << "seed " << seed;
    EXPECT_EQ(t.hash(), c.hash()) << "seed " << seed;
    EXPECT_EQ(s.hash(), c.hash()) << "seed " << seed;
    EXPECT_NE(s.hash_storage(), c.hash_storage());
    EXPECT_EQ(c.hash_storage(), XXH3_64bits(c.buf->data(), c.buf->size()));
    // A gap byte changes the storage hash but not the logical one.
    const uint64_t logical = s.hash(), storage = s.hash_storage();
    s.buf->data()[2 * 2] ^= 0xFF;   // slot 2 lies between the elements at slots 1 and 3
    EXPECT_EQ(s.hash(), logical);
    EXPECT_NE(s.hash_storage(), storage);
    // Any element change changes the logical hash; flipping it back restores it.
    t.set_bits(17, t.bits(17) ^ 1);
    EXPECT_NE(t.hash(), c.hash());
    t.set_bits(17, t.bits(17) ^ 1);
    EXPECT_EQ(t.hash(), c.hash());
}

TEST(Tensor, HashOfLargeStridedTensorMatchesGathered) {
    // More than one 64 KiB chunk of gathered bytes.
    Tensor s = Tensor::empty(DType::f32, {300, 129}, layout(Layout::Kind::transposed));
    for (int64_t i = 0; i < s.numel(); ++i) s.set(i, double(i % 1000) - 500.5);
    Tensor c = Tensor::empty(DType::f32, {300, 129});
    for (int64_t i = 0; i < c.numel(); ++i) c.set(i, double(i % 1000) - 500.5);
    EXPECT_EQ(s.hash(), gathered_hash(s));
    EXPECT_EQ(s.hash(), c.hash());
}

TEST(Tensor, CloneAndToF64) {
    Tensor x = Tensor::empty(DType::f16, {3, 5}, layout(Layout::Kind::transposed, 2), Poison::bytes(0x7E));
    for (int64_t i = 0; i < x.numel(); ++i) x.set_bits(i, uint64_t(0x3C00 + i * 0x111));
    x.set_bits(4, 0x8000);   // -0
    x.set_bits(5, 0x7E01);   // NaN with payload
    x.set_bits(6, 0x0003);   // subnormal
    Tensor y = x.clone();
    EXPECT_NE(y.buf.get(), x.buf.get());
    EXPECT_EQ(y.strides, x.strides);
    EXPECT_EQ(y.offset, x.offset);
    EXPECT_EQ(y.hash(), x.hash());
    EXPECT_EQ(y.hash_storage(), x.hash_storage());
    y.set(0, 2.0);
    EXPECT_EQ(x.get(0), 1.0) << "the clone has its own storage";

    Tensor d = x.to_f64();
    EXPECT_EQ(d.dtype, DType::f64);
    EXPECT_TRUE(d.contiguous());
    EXPECT_EQ(d.offset, 0);
    EXPECT_EQ(d.shape, x.shape);
    for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_EQ(d.bits(i), std::bit_cast<uint64_t>(x.get(i))) << i;
    EXPECT_TRUE(std::signbit(d.get(4)));
    EXPECT_TRUE(std::isnan(d.get(5)));
    EXPECT_EQ(d.get(6), 3 * std::ldexp(1.0, -24));
}

TEST(Tensor, DlpackViewAndAddressRange) {
    Tensor x = Tensor::empty(DType::bf16, {2, 3}, layout(Layout::Kind::strided, 1));
    DLTensor d = x.dlpack();
    EXPECT_EQ(d.data, x.buf->data());
    EXPECT_EQ(d.device.device_type, kDLCPU);
    EXPECT_EQ(d.device.device_id, 0);
    EXPECT_EQ(d.ndim, 2);
    EXPECT_EQ(d.dtype.code, kDLBfloat);
    EXPECT_EQ(d.dtype.bits, 16);
    EXPECT_EQ(d.shape, x.shape.data());
    EXPECT_EQ(d.strides, x.strides.data());
    EXPECT_EQ(d.strides[0], 6);
    EXPECT_EQ(d.strides[1], 2);
    EXPECT_EQ(d.byte_offset, 2u);
    auto [lo, hi] = x.address_range();
    const uintptr_t base = reinterpret_cast<uintptr_t>(x.buf->data());
    EXPECT_EQ(lo, base + 2);
    EXPECT_EQ(hi, base + 2 + (6 + 4 + 1) * 2);
    EXPECT_EQ(hi, base + x.buf->size()) << "the last element ends the interior";

    Tensor c = Tensor::empty(DType::f32, {4, 4});
    auto [clo, chi] = c.address_range();
    EXPECT_EQ(chi - clo, 64u);
    EXPECT_EQ(Tensor::empty(DType::tf32, {1}).dlpack().dtype.code, kDLFloat);
}

TEST(Tensor, FillPoisonAndShapeStr) {
    Tensor x = Tensor::empty(DType::f32, {4}, {}, Poison::bytes(0xFF));
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(x.bits(i), 0xFFFFFFFFu);
    EXPECT_TRUE(std::isnan(x.get(0)));
    Tensor r = Tensor::empty(DType::u8, {64}, {}, Poison::random(5));
    for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(r.bits(i), Poison::random(5).at(size_t(i)));
    EXPECT_EQ(shape_str({2, 3}), "[2, 3]");
    EXPECT_EQ(shape_str({}), "[]");
    EXPECT_EQ(shape_str({7}), "[7]");
}

}  // namespace
}  // namespace kcv
