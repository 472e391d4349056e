// Arrays crossing the Python boundary (DLPack, through nanobind) and kcv::Tensor. Values are
// copied both ways: the verifier's tensors never share memory with a candidate's, so nothing a
// candidate does after a call can change what is judged.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "kcv/tensor.hpp"

namespace kcv::py {

namespace nb = nanobind;

// Any dtype, any strides, host memory. Torch tensors arrive through __dlpack__.
using HostArray = nb::ndarray<nb::ro, nb::device::cpu>;

// A contiguous copy of the array's logical elements in its own dtype.
Tensor to_tensor(const HostArray& a);

// A torch tensor holding a copy of the tensor's logical elements (contiguous).
nb::object to_torch(const Tensor& t);

// Writes `t`'s logical elements into `a`, which must have the same shape and dtype.
void copy_into(const Tensor& t, nb::ndarray<nb::device::cpu>& a);

}  // namespace kcv::py
