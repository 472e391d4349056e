// Shared pieces of the project's kernels: reading the kcv_call (kcv_kernel.h), element access
// that honours every DLTensor's strides and byte_offset, lanes along a reduced axis, attributes,
// and the error convention (exceptions inside a kernel, a status and a message at the ABI).
// Header-only and independent of libkcv: a kernel is built and loaded exactly like a user's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <dlpack/dlpack.h>

#include "kcv/kcv_kernel.h"
#include "kcv_half.hpp"

// Every symbol of the ABI a kernel exports; everything else stays hidden, so two kernels loaded
// into one process never share a helper or its state.
#define KCV_EXPORT extern "C" __attribute__((visibility("default")))

namespace kcvk __attribute__((visibility("hidden"))) {

// A refused call: wrong arity, dtype, shape, device or attribute, or an index out of range
// under the "raise" policy. run_kernel turns it into a nonzero status and the message.
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Dtype : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean, other };

// kDLBool of DLPack 0.8 and later; the installed dlpack.h may predate it.
constexpr uint8_t kDLBoolCode = 6;

inline Dtype dtype_of(DLDataType t) {
    if (t.lanes != 1) return Dtype::other;
    switch (t.code) {
        case kDLFloat:
            return t.bits == 64 ? Dtype::f64 : t.bits == 32 ? Dtype::f32 : t.bits == 16 ? Dtype::f16 : Dtype::other;
        case kDLBfloat: return t.bits == 16 ? Dtype::bf16 : Dtype::other;
        case kDLInt:
            return t.bits == 64 ? Dtype::i64
                 : t.bits == 32 ? Dtype::i32
                 : t.bits == 16 ? Dtype::i16
                 : t.bits == 8  ? Dtype::i8
                                : Dtype::other;
        case kDLUInt: return t.bits == 8 ? Dtype::u8 : Dtype::other;
        case kDLBoolCode: return t.bits == 8 ? Dtype::boolean : Dtype::other;
        default: return Dtype::other;
    }
}

inline const char* dtype_name(Dtype t) {
    switch (t) {
        case Dtype::f64: return "f64";
        case Dtype::f32: return "f32";
        case Dtype::f16: return "f16";
        case Dtype::bf16: return "bf16";
        case Dtype::i64: return "i64";
        case Dtype::i32: return "i32";
        case Dtype::i16: return "i16";
        case Dtype::i8: return "i8";
        case Dtype::u8: return "u8";
        case Dtype::boolean: return "bool";
        case Dtype::other: break;
    }
    return "unsupported";
}

inline int dtype_bytes(Dtype t) {
    switch (t) {
        case Dtype::f64:
        case Dtype::i64: return 8;
        case Dtype::f32:
        case Dtype::i32: return 4;
        case Dtype::f16:
        case Dtype::bf16:
        case Dtype::i16: return 2;
        default: return 1;
    }
}

inline bool is_float(Dtype t) { return t == Dtype::f64 || t == Dtype::f32 || t == Dtype::f16 || t == Dtype::bf16; }
inline bool is_integer(Dtype t) {
    return t == Dtype::i64 || t == Dtype::i32 || t == Dtype::i16 || t == Dtype::i8 || t == Dtype::u8;
}

// One DLTensor of a call. Offsets are in elements from base() = data + byte_offset; logical
// indices are row-major over the shape, whatever the strides.
class TensorRef {
public:
    static constexpr int kMaxDims = 8;

    TensorRef(const DLTensor& t, std::string role) : role_(std::move(role)), dtype_(dtype_of(t.dtype)) {
        if (dtype_ == Dtype::other) throw Error(role_ + ": unsupported dtype");
        if (t.ndim < 0 || t.ndim > kMaxDims) throw Error(role_ + ": rank " + std::to_string(t.ndim) + " unsupported");
        if (t.ndim > 0 && t.shape == nullptr) throw Error(role_ + ": shape is NULL");
        ndim_ = t.ndim;
        device_ = t.device;
        base_ = static_cast<char*>(t.data) + t.byte_offset;
        int64_t compact = 1;
        for (int d = ndim_ - 1; d >= 0; --d) {
            if (t.shape[d] < 0) throw Error(role_ + ": negative extent");
            shape_[d] = t.shape[d];
            strides_[d] = t.strides ? t.strides[d] : compact;
            compact *= t.shape[d];
        }
        numel_ = compact;
        if (numel_ > 0 && t.data == nullptr) throw Error(role_ + ": data is NULL");
    }

    const std::string& role() const { return role_; }
    Dtype dtype() const { return dtype_; }
    int ndim() const { return ndim_; }
    int64_t numel() const { return numel_; }
    const DLDevice& device() const { return device_; }
    char* base() const { return base_; }
    // Negative d counts from the end, as in Python.
    int64_t size(int d) const { return shape_[axis(d)]; }
    int64_t stride(int d) const { return strides_[axis(d)]; }

    int axis(int d) const {
        const int a = d < 0 ? d + ndim_ : d;
        if (a < 0 || a >= ndim_) throw Error(role_ + ": no dimension " + std::to_string(d) + " in rank " + std::to_string(ndim_));
        return a;
    }

    int64_t offset_of(int64_t logical) const {
        int64_t off = 0;
        for (int d = ndim_ - 1; d >= 0; --d) {
            off += (logical % shape_[d]) * strides_[d];
            logical /= shape_[d];
        }
        return off;
    }

    std::string shape_str() const {
        std::string s = "[";
        for (int d = 0; d < ndim_; ++d) s += (d ? "," : "") + std::to_string(shape_[d]);
        return s + "]";
    }

    void expect_dtype(Dtype t) const {
        if (dtype_ != t) throw Error(role_ + ": dtype " + dtype_name(dtype_) + ", expected " + dtype_name(t));
    }
    void expect_rank(int n) const {
        if (ndim_ != n) throw Error(role_ + ": rank " + std::to_string(ndim_) + " " + shape_str() + ", expected " + std::to_string(n));
    }
    void expect_cpu() const {
        if (device_.device_type != kDLCPU && device_.device_type != kDLCUDAHost)
            throw Error(role_ + ": a CPU kernel needs host memory (device type " + std::to_string(device_.device_type) + ")");
    }
    void expect_cuda() const {
        if (device_.device_type != kDLCUDA && device_.device_type != kDLCUDAManaged)
            throw Error(role_ + ": a CUDA kernel needs device memory (device type " + std::to_string(device_.device_type) + ")");
    }

    // Exact value of the element at `off` (elements from base()), any float or integer dtype.
    double load(int64_t off) const {
        const char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::f64: return read<double>(p);
            case Dtype::f32: return read<float>(p);
            case Dtype::f16: return f32_from_f16(read<uint16_t>(p));
            case Dtype::bf16: return f32_from_bf16(read<uint16_t>(p));
            case Dtype::i64: return static_cast<double>(read<int64_t>(p));
            case Dtype::i32: return read<int32_t>(p);
            case Dtype::i16: return read<int16_t>(p);
            case Dtype::i8: return read<int8_t>(p);
            case Dtype::u8:
            case Dtype::boolean: return read<uint8_t>(p);
            case Dtype::other: break;
        }
        return 0;
    }

    // A float element as float32: exact for f32, f16 and bf16.
    float load_f32(int64_t off) const {
        const char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::f32: return read<float>(p);
            case Dtype::f16: return f32_from_f16(read<uint16_t>(p));
            case Dtype::bf16: return f32_from_bf16(read<uint16_t>(p));
            default: return static_cast<float>(load(off));
        }
    }

    int64_t load_index(int64_t off) const {
        const char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::i64: return read<int64_t>(p);
            case Dtype::i32: return read<int32_t>(p);
            case Dtype::i16: return read<int16_t>(p);
            case Dtype::i8: return read<int8_t>(p);
            case Dtype::u8: return read<uint8_t>(p);
            default: throw Error(role_ + ": an index tensor needs an integer dtype, not " + dtype_name(dtype_));
        }
    }

    // Stores v rounded to nearest even in the tensor's dtype (one rounding from float64).
    // Integer dtypes take integral values only (an index, a count).
    void store(int64_t off, double v) const {
        char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::f64: write(p, v); break;
            case Dtype::f32: write(p, static_cast<float>(v)); break;
            case Dtype::f16: write(p, f16_from_f64(v)); break;
            case Dtype::bf16: write(p, bf16_from_f64(v)); break;
            case Dtype::i64: write(p, static_cast<int64_t>(v)); break;
            case Dtype::i32: write(p, static_cast<int32_t>(v)); break;
            case Dtype::i16: write(p, static_cast<int16_t>(v)); break;
            case Dtype::i8: write(p, static_cast<int8_t>(v)); break;
            case Dtype::u8:
            case Dtype::boolean: write(p, static_cast<uint8_t>(v)); break;
            case Dtype::other: break;
        }
    }

    void store_f32(int64_t off, float v) const {
        char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::f32: write(p, v); break;
            case Dtype::f16: write(p, f16_from_f32(v)); break;
            case Dtype::bf16: write(p, bf16_from_f32(v)); break;
            default: store(off, v); break;
        }
    }

    void store_index(int64_t off, int64_t v) const {
        char* p = base_ + off * dtype_bytes(dtype_);
        switch (dtype_) {
            case Dtype::i64: write(p, v); break;
            case Dtype::i32: write(p, static_cast<int32_t>(v)); break;
            default: store(off, static_cast<double>(v)); break;
        }
    }

private:
    template <typename T>
    static T read(const char* p) {
        T v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    template <typename T>
    static void write(char* p, T v) {
        std::memcpy(p, &v, sizeof v);
    }

    std::string role_;
    Dtype dtype_;
    int ndim_ = 0;
    DLDevice device_{};
    char* base_ = nullptr;
    int64_t shape_[kMaxDims] = {};
    int64_t strides_[kMaxDims] = {};
    int64_t numel_ = 1;
};

// The lanes of a tensor along one axis: every combination of the other coordinates, in
// row-major order (which is also the logical order of a reduction's output, whether it keeps
// the reduced axis with size 1 or drops it).
class AxisLanes {
public:
    AxisLanes(const TensorRef& t, int axis_arg) : axis_(t.ndim() == 0 ? 0 : t.axis(axis_arg)) {
        if (t.ndim() == 0) return;
        length_ = t.size(axis_);
        step_ = t.stride(axis_);
        for (int d = 0; d < t.ndim(); ++d) {
            if (d == axis_) continue;
            shape_[rank_] = t.size(d);
            strides_[rank_] = t.stride(d);
            count_ *= t.size(d);
            ++rank_;
        }
    }

    int64_t count() const { return count_; }
    int64_t length() const { return length_; }
    int64_t step() const { return step_; }
    int64_t base(int64_t lane) const {
        int64_t off = 0;
        for (int d = rank_ - 1; d >= 0; --d) {
            off += (lane % shape_[d]) * strides_[d];
            lane /= shape_[d];
        }
        return off;
    }

private:
    int axis_ = 0;
    int rank_ = 0;
    int64_t count_ = 1, length_ = 1, step_ = 1;
    int64_t shape_[TensorRef::kMaxDims] = {};
    int64_t strides_[TensorRef::kMaxDims] = {};
};

// ---- the call -------------------------------------------------------------------------------

inline const kcv_attribute* find_attribute(const kcv_call& c, const char* name) {
    for (int32_t i = 0; i < c.n_attributes; ++i) {
        if (c.attributes[i].name && std::strcmp(c.attributes[i].name, name) == 0) return &c.attributes[i];
    }
    return nullptr;
}

inline double attribute(const kcv_call& c, const char* name, double fallback) {
    const kcv_attribute* a = find_attribute(c, name);
    return a ? a->value : fallback;
}

// An integral attribute within [lo, hi].
inline int64_t int_attribute(const kcv_call& c, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
    const double v = attribute(c, name, static_cast<double>(fallback));
    if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != static_cast<double>(static_cast<int64_t>(v)))
        throw Error(std::string("attribute ") + name + " = " + std::to_string(v) + " is not an integer in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int64_t>(v);
}

// The reduced axis: attribute "dim" (default -1, the last), within the input's rank.
inline int reduced_axis(const kcv_call& c, const TensorRef& x) {
    const int64_t r = x.ndim();
    return static_cast<int>(int_attribute(c, "dim", -1, -std::max<int64_t>(r, 1), std::max<int64_t>(r - 1, 0)));
}

// The operation of a contract id: everything before its last '-' ("log_softmax-f32" ->
// "log_softmax", "gather-clamp-f32" -> "gather-clamp"); the dtypes come from the tensors.
inline std::string operation(const kcv_call& c) {
    const std::string id = c.contract_id ? c.contract_id : "";
    const size_t dash = id.rfind('-');
    return dash == std::string::npos ? id : id.substr(0, dash);
}

inline void expect_arity(const kcv_call& c, int inputs, int outputs) {
    if (c.n_inputs != inputs || c.n_outputs != outputs)
        throw Error(std::string(c.contract_id ? c.contract_id : "?") + ": expected " + std::to_string(inputs) +
                    " inputs and " + std::to_string(outputs) + " outputs, got " + std::to_string(c.n_inputs) +
                    " and " + std::to_string(c.n_outputs));
    if ((inputs > 0 && c.inputs == nullptr) || (outputs > 0 && c.outputs == nullptr))
        throw Error("the call's tensor arrays are NULL");
}

inline void expect_same_shape(const TensorRef& a, const TensorRef& b) {
    bool same = a.ndim() == b.ndim();
    for (int d = 0; same && d < a.ndim(); ++d) same = a.size(d) == b.size(d);
    if (!same) throw Error(a.role() + " " + a.shape_str() + " and " + b.role() + " " + b.shape_str() + " must have the same shape");
}

// ---- the ABI boundary -----------------------------------------------------------------------

inline std::string& last_error_storage() {
    static thread_local std::string message;
    return message;
}

inline const char* last_error() { return last_error_storage().c_str(); }

// Runs a kernel body: checks the call, turns an exception into status 1 and its message.
template <typename Body>
int run_kernel(const kcv_call* call, Body&& body) {
    if (call == nullptr) {
        last_error_storage() = "kcv_kernel called with NULL";
        return 1;
    }
    if (call->abi_version != KCV_ABI_VERSION) {
        last_error_storage() = "ABI version " + std::to_string(call->abi_version) + ", this kernel implements " +
                               std::to_string(KCV_ABI_VERSION);
        return 1;
    }
    try {
        body(*call);
        return 0;
    } catch (const std::exception& e) {
        last_error_storage() = e.what();
    } catch (...) {
        last_error_storage() = "unknown exception";
    }
    return 1;
}

}  // namespace kcvk
