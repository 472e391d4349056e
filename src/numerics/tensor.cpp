// Host tensors over guarded buffers. Element access goes through storage bits so that every
// dtype, including the 1-byte and 2-byte float formats, is handled by dtype.cpp alone.
#include "kcv/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <xxhash.h>

namespace kcv {
namespace {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(shape.size());
    int64_t step = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        s[i] = step;
        step *= std::max<int64_t>(shape[i], 1);
    }
    return s;
}

// Smallest and largest element offsets (relative to the storage offset) over the shape.
std::pair<int64_t, int64_t> index_span(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
        const int64_t reach = (shape[i] - 1) * strides[i];
        if (reach < 0) lo += reach;
        else hi += reach;
    }
    return {lo, hi};
}

}  // namespace

Tensor Tensor::empty(DType t, const std::vector<int64_t>& shape, Layout layout, Poison fill, size_t guard) {
    for (int64_t d : shape)
        if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(shape));
    if (layout.storage_offset < 0) throw std::invalid_argument("negative storage offset");

    Tensor x;
    x.dtype = t;
    x.shape = shape;
    x.offset = layout.storage_offset;
    const size_t nd = shape.size();
    switch (layout.kind) {
        case Layout::Kind::contiguous: x.strides = row_major_strides(shape); break;
        case Layout::Kind::transposed: {
            if (nd < 2) {
                x.strides = row_major_strides(shape);
                break;
            }
            // Row-major storage of the shape with its last two dimensions swapped.
            std::vector<int64_t> stored = shape;
            std::swap(stored[nd - 1], stored[nd - 2]);
            x.strides = row_major_strides(stored);
            std::swap(x.strides[nd - 1], x.strides[nd - 2]);
            break;
        }
        case Layout::Kind::strided:
            x.strides = row_major_strides(shape);
            for (int64_t& s : x.strides) s *= 2;
            break;
    }
    int64_t elements = x.offset;
    if (x.numel() > 0) elements += index_span(x.shape, x.strides).second + 1;
    const size_t bytes = size_t(elements) * size_t(info(t).storage_bytes);
    x.buf = std::make_shared<GuardedBuffer>(bytes, guard);
    x.buf->poison(fill);
    return x;
}

int64_t Tensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::vector<int64_t> Tensor::coords(int64_t logical) const {
    if (logical < 0 || logical >= numel())
        throw std::out_of_range("logical index " + std::to_string(logical) + " outside a tensor of shape " +
                                shape_str(shape));
    std::vector<int64_t> c(shape.size());
    for (size_t i = shape.size(); i-- > 0;) {
        c[i] = logical % shape[i];
        logical /= shape[i];
    }
    return c;
}

int64_t Tensor::storage_index(int64_t logical) const {
    if (logical < 0 || logical >= numel())
        throw std::out_of_range("logical index " + std::to_string(logical) + " outside a tensor of shape " +
                                shape_str(shape));
    if (contiguous()) return offset + logical;   // nearly every tensor: no division per element
    int64_t s = offset;
    for (size_t i = shape.size(); i-- > 0;) {
        s += (logical % shape[i]) * strides[i];
        logical /= shape[i];
    }
    return s;
}

bool Tensor::contiguous() const {
    int64_t step = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        if (shape[i] == 1) continue;   // the stride of a size-1 dimension is never used
        if (strides[i] != step) return false;
        step *= shape[i];
    }
    return true;
}

// Storage is little-endian in the low bytes of the word, as on every host kcv runs on.
uint64_t Tensor::bits(int64_t logical) const {
    const size_t sz = size_t(info(dtype).storage_bytes);
    uint64_t b = 0;
    std::memcpy(&b, buf->data() + size_t(storage_index(logical)) * sz, sz);
    return b;
}

void Tensor::set_bits(int64_t logical, uint64_t b) {
    const size_t sz = size_t(info(dtype).storage_bytes);
    std::memcpy(buf->data() + size_t(storage_index(logical)) * sz, &b, sz);
}

double Tensor::get(int64_t logical) const { return decode(dtype, bits(logical)); }

void Tensor::set(int64_t logical, double v) { set_bits(logical, encode(dtype, v)); }

Tensor Tensor::to_f64() const {
    Tensor y = Tensor::empty(DType::f64, shape);
    double* out = reinterpret_cast<double*>(y.buf->data());
    const int64_t n = numel();
    for (int64_t i = 0; i < n; ++i) out[i] = get(i);
    return y;
}

Tensor Tensor::clone() const {
    Tensor y;
    y.dtype = dtype;
    y.shape = shape;
    y.strides = strides;
    y.offset = offset;
    y.buf = std::make_shared<GuardedBuffer>(buf->size(), buf->guard_size(), buf->guard_poison());
    std::memcpy(y.buf->data(), buf->data(), buf->size());
    return y;
}

uint64_t Tensor::hash() const {
    const size_t sz = size_t(info(dtype).storage_bytes);
    const int64_t n = numel();
    if (contiguous()) return XXH3_64bits(buf->data() + size_t(offset) * sz, size_t(n) * sz);
    // Streaming in chunks gives the same digest as hashing the gathered elements at once.
    XXH3_state_t* st = XXH3_createState();
    if (!st) throw std::bad_alloc();
    XXH3_64bits_reset(st);
    constexpr size_t kChunk = 1 << 16;
    std::vector<uint8_t> chunk;
    chunk.reserve(kChunk + 8);
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t* p = buf->data() + size_t(storage_index(i)) * sz;
        chunk.insert(chunk.end(), p, p + sz);
        if (chunk.size() >= kChunk) {
            XXH3_64bits_update(st, chunk.data(), chunk.size());
            chunk.clear();
        }
    }
    XXH3_64bits_update(st, chunk.data(), chunk.size());
    const uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

uint64_t Tensor::hash_storage() const { return XXH3_64bits(buf->data(), buf->size()); }

DLTensor Tensor::dlpack() {
    DLTensor d{};
    d.data = buf->data();
    d.device = DLDevice{kDLCPU, 0};
    d.ndim = int32_t(shape.size());
    d.dtype = to_dlpack(dtype);
    d.shape = shape.data();
    d.strides = strides.data();
    d.byte_offset = uint64_t(offset) * uint64_t(info(dtype).storage_bytes);
    return d;
}

std::pair<uintptr_t, uintptr_t> Tensor::address_range() const {
    const size_t sz = size_t(info(dtype).storage_bytes);
    const uintptr_t base = reinterpret_cast<uintptr_t>(buf->data()) + uintptr_t(offset) * sz;
    if (numel() == 0) return {base, base};
    auto [lo, hi] = index_span(shape, strides);
    return {base + uintptr_t(lo * int64_t(sz)), base + uintptr_t((hi + 1) * int64_t(sz))};
}

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

}  // namespace kcv
