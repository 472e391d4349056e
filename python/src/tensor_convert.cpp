// Element-by-element copies between strided DLPack arrays and kcv::Tensor, in storage bits, so
// that every dtype (bf16, fp8, bool) travels without a conversion through another format.
#include "tensor_convert.hpp"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "kcv/dtype.hpp"

namespace kcv::py {
namespace {

DType dtype_of(nb::dlpack::dtype d) {
    return from_dlpack(DLDataType{d.code, d.bits, static_cast<uint16_t>(d.lanes)});
}

std::vector<int64_t> shape_of(size_t ndim, auto&& shape_at) {
    std::vector<int64_t> s(ndim);
    for (size_t i = 0; i < ndim; ++i) s[i] = static_cast<int64_t>(shape_at(i));
    return s;
}

// Byte offset of a logical (row-major) element in a strided array.
int64_t byte_offset(int64_t logical, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t item) {
    int64_t off = 0;
    for (size_t i = shape.size(); i-- > 0;) {
        off += (logical % shape[i]) * strides[i];
        logical /= shape[i];
    }
    return off * item;
}

}  // namespace

Tensor to_tensor(const HostArray& a) {
    const DType t = dtype_of(a.dtype());
    const std::vector<int64_t> shape = shape_of(a.ndim(), [&](size_t i) { return a.shape(i); });
    std::vector<int64_t> strides(a.ndim());
    for (size_t i = 0; i < a.ndim(); ++i) strides[i] = a.stride(i);
    Tensor out = Tensor::empty(t, shape);
    const int64_t item = info(t).storage_bytes;
    const int64_t n = out.numel();
    const auto* src = static_cast<const uint8_t*>(a.data());
    uint8_t* dst = out.buf->data();
    bool contiguous = true;
    for (size_t i = 0; i < shape.size(); ++i) contiguous = contiguous && (shape[i] == 1 || strides[i] == out.strides[i]);
    if (contiguous) {
        if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n * item));
        return out;
    }
    for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * item, src + byte_offset(i, shape, strides, item), static_cast<size_t>(item));
    return out;
}

nb::object to_torch(const Tensor& t) {
    Tensor* copy = new Tensor(t.clone());
    // The copy must be contiguous for a plain row-major view; clone keeps the layout.
    if (!copy->contiguous() || copy->offset != 0) {
        Tensor dense = Tensor::empty(t.dtype, t.shape);
        for (int64_t i = 0; i < t.numel(); ++i) dense.set_bits(i, t.bits(i));
        *copy = std::move(dense);
    }
    nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    std::vector<size_t> shape(copy->shape.begin(), copy->shape.end());
    const DLDataType d = to_dlpack(copy->dtype);
    nb::dlpack::dtype dt{d.code, d.bits, d.lanes};
    nb::ndarray<nb::pytorch> arr(copy->buf->data(), shape.size(), shape.data(), owner, nullptr, dt,
                                 nb::device::cpu::value);
    return nb::cast(arr);
}

void copy_into(const Tensor& t, nb::ndarray<nb::device::cpu>& a) {
    if (dtype_of(a.dtype()) != t.dtype) throw std::invalid_argument("copy_into: dtype differs");
    if (a.ndim() != t.shape.size()) throw std::invalid_argument("copy_into: rank differs");
    std::vector<int64_t> shape(a.ndim()), strides(a.ndim());
    for (size_t i = 0; i < a.ndim(); ++i) {
        shape[i] = static_cast<int64_t>(a.shape(i));
        strides[i] = a.stride(i);
        if (shape[i] != t.shape[i]) throw std::invalid_argument("copy_into: shape differs");
    }
    const int64_t item = info(t.dtype).storage_bytes;
    auto* dst = static_cast<uint8_t*>(a.data());
    for (int64_t i = 0; i < t.numel(); ++i) {
        const uint64_t b = t.bits(i);
        std::memcpy(dst + byte_offset(i, shape, strides, item), &b, static_cast<size_t>(item));
    }
}

}  // namespace kcv::py
