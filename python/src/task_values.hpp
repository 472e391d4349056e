// Value families over an opaque task's own inputs. A KernelBench problem draws its inputs in
// get_inputs(); kcv does not know that distribution, so the families that GATES.md defines
// relative to "the task distribution" are applied to the values get_inputs() produced:
// task keeps them, band scales them, repeated repeats one of them. The other families do not
// depend on the task and come from kcv::fill.
//
// Exact zeros of the task values are treated as structure (masks, triangular operands,
// padding; fairness rule 4): every family and every injection leaves them zero.
#pragma once

#include <cstdint>
#include <vector>

#include "kcv/contract.hpp"
#include "kcv/families.hpp"
#include "kcv/tensor.hpp"

namespace kcv::py {

// True for the families that transform task values rather than draw new ones.
bool task_relative(Family::Kind k);

// Replaces `values` (the task's values for one floating-point input) by the family's values
// under `seed`. Non-floating tensors are left alone.
void apply_family(Tensor& values, const InputSpec& spec, const Family& f, uint64_t seed);

// Injects special values (EXC-01) and returns the logical indices changed; positions where
// `task` holds an exact zero are left alone (and not reported).
std::vector<int64_t> inject_specials(Tensor& values, const Tensor& task, const InputSpec& spec, const Specials& s,
                                     uint64_t seed);

}  // namespace kcv::py
