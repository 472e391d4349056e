// A host tensor over a guarded buffer: dtype, shape, strides and storage offset in elements,
// exposed to candidates as a DLTensor. Logical indices are row-major over the shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "kcv/buffer.hpp"
#include "kcv/dtype.hpp"

namespace kcv {

// How a tensor is laid out in its buffer (CMP-01 probes non-contiguous layouts).
struct Layout {
    enum class Kind : uint8_t { contiguous, transposed, strided } kind = Kind::contiguous;
    // transposed: the last two dimensions are stored swapped (column-major matrices);
    // strided: every dimension's stride is doubled, elements interleaved with untouched slots.
    int64_t storage_offset = 0;   // elements before the first one
};

struct Tensor {
    DType dtype = DType::f32;
    std::vector<int64_t> shape, strides;   // strides in elements
    int64_t offset = 0;                    // storage offset in elements
    std::shared_ptr<GuardedBuffer> buf;

    static Tensor empty(DType t, const std::vector<int64_t>& shape, Layout layout = {},
                        Poison fill = Poison::bytes(0), size_t guard = GuardedBuffer::kDefaultGuard);
    int64_t numel() const;
    int64_t storage_index(int64_t logical) const;   // element index in the buffer
    std::vector<int64_t> coords(int64_t logical) const;
    bool contiguous() const;

    uint64_t bits(int64_t logical) const;
    void set_bits(int64_t logical, uint64_t b);
    double get(int64_t logical) const;              // exact widening
    void set(int64_t logical, double v);            // rounds to dtype (RNE)

    Tensor to_f64() const;                          // exact, contiguous, fresh buffer
    Tensor clone() const;                           // same dtype and layout, fresh buffer
    uint64_t hash() const;                          // of the logical elements' bits, XXH3
    uint64_t hash_storage() const;                  // of every byte of the interior (incl. gaps)
    DLTensor dlpack();                              // valid while *this lives
    // Address range [lo, hi) of the bytes the tensor's elements occupy.
    std::pair<uintptr_t, uintptr_t> address_range() const;
};

std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace kcv
