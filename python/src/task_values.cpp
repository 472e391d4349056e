#include "task_values.hpp"

#include <stdexcept>

#include "kcv/dtype.hpp"
#include "kcv/rng.hpp"

namespace kcv::py {
namespace {

bool is_zero(const Tensor& t, int64_t i) {
    const FpClass c = classify(t.dtype, t.bits(i));
    return c == FpClass::pos_zero || c == FpClass::neg_zero;
}

// Puts the task's structural zeros back after a family drew new values everywhere.
void restore_zeros(Tensor& values, const Tensor& task) {
    for (int64_t i = 0; i < values.numel(); ++i)
        if (is_zero(task, i)) values.set_bits(i, task.bits(i));
}

}  // namespace

bool task_relative(Family::Kind k) {
    return k == Family::Kind::task || k == Family::Kind::band || k == Family::Kind::repeated;
}

void apply_family(Tensor& values, const InputSpec& spec, const Family& f, uint64_t seed) {
    if (!info(values.dtype).is_float) return;
    const int64_t n = values.numel();
    switch (f.kind) {
        case Family::Kind::task: return;
        case Family::Kind::band:
            // Rounded to the input dtype: what a caller scaling its data would hand the kernel.
            for (int64_t i = 0; i < n; ++i) values.set(i, values.get(i) * f.scale);
            return;
        case Family::Kind::repeated: {
            if (n == 0) return;
            // A seeded position; the first nonzero from there, so that structure is not repeated.
            int64_t pick = CounterRng(seed, 0).integer(0, 0, n - 1);
            for (int64_t step = 0; step < n && is_zero(values, pick); ++step) pick = (pick + 1) % n;
            const uint64_t bits = values.bits(pick);
            for (int64_t i = 0; i < n; ++i)
                if (!is_zero(values, i)) values.set_bits(i, bits);
            return;
        }
        default: {
            const Tensor task = values.clone();
            fill(values, spec, f, seed);
            restore_zeros(values, task);
            return;
        }
    }
}

std::vector<int64_t> inject_specials(Tensor& values, const Tensor& task, const InputSpec& spec, const Specials& s,
                                     uint64_t seed) {
    if (task.numel() != values.numel()) throw std::invalid_argument("inject_specials: task and values differ in size");
    std::vector<int64_t> hit = inject(values, spec, s, seed);
    std::vector<int64_t> kept;
    kept.reserve(hit.size());
    for (int64_t i : hit) {
        if (is_zero(task, i)) values.set_bits(i, task.bits(i));
        else kept.push_back(i);
    }
    return kept;
}

}  // namespace kcv::py
