// The two error models of GATES.md. Pure functions over the reference, the scale and an output.
#pragma once

#include <cstdint>
#include <string>

#include "kcv/contract.hpp"
#include "kcv/tensor.hpp"

namespace kcv {

struct ErrorModelParams {
    double c = 4.0;                        // analytic constant
    double u_acc = 0x1p-24;                // unit roundoff of the declared accumulator
    double eta_acc = 0;                    // η(acc): the most a product that underflows the
                                           // accumulator loses, half its smallest subnormal
                                           // (reduction and scan outputs; 0 elementwise)
    double u_out = 0x1p-24;                // unit roundoff of the output dtype
    double ulp_min_normal = 0;             // ulp_out(min normal)
    double u_op = 0;                       // unit roundoff of the operand format the contract
                                           // allows (tf32_operands, bf16_operands), 0 if none
    double operand_roundings = 2;          // rounded operands along one term of the output
                                           // (OutputSpec::operand_roundings)
};
// True for an output that is a sum of products (reduction and scan models): only its terms can
// underflow before the output's own rounding, and only its operands can be rounded.
bool accumulates(const OutputSpec& o);
// The model of output o with operands at their own precision.
ErrorModelParams params_for(const OutputSpec& o, double c);
// The model of output `out` of contract `contract`, with the operand format it allows: the
// operands of the products behind an accumulating output (reduction, scan) may then be rounded
// to that format, which every gate's bound admits, not only PRC-03's.
ErrorModelParams params_for(const Contract& contract, size_t out, double c);
// The coarsest operand format a contract allows; f32 when it allows none.
DType allowed_operands(const Semantics& s);
// The magnitude its oracle floors operands at in the scale (OracleArgs::operand_floor): the
// smallest normal of the allowed operand format, 0 when the contract allows none. The scale
// s_i then bounds an operand's rounding below that normal too, where the error is u(F)·N_F and
// not u(F)·|a|. Every term of τ_i reads that s_i: the accumulation term grows with it as well,
// by at most c·√K·u(acc)/(2·u(op)) of the operand term and only where an operand is below N_F.
double operand_floor(const Contract& contract);

// τ_i = c·√K·(u(acc)·s_i + η(acc)) + n·u(op)·s_i + u(out)·|y*_i| + ulp_out(min normal), given
// s_i and |y*_i|. The operand term: each product a·b of the sum with both operands rounded once
// carries a relative error of at most 2·u(op), so the sum's error is at most 2·u(op)·Σ|a·b|; it
// does not grow with √K (an operand is rounded once, not once per addition). n = 2 unless the
// output declares that its terms pass through more rounded operands (operand_roundings): a term
// that is a chain of products, each intermediate rounded once, errs by at most n·u(op) of it.
// η(acc) is the absolute error of IEEE gradual underflow, fl(a·b) = a·b·(1 + δ) + η: negligible
// unless the terms themselves are subnormal, where a sum of K products is only exact to about
// √K·η whatever the order.
double analytic_tau(const ErrorModelParams& p, int64_t k, double s, double abs_ystar);

// r = max_i |y_i − y*_i| / τ_i over positions where y* is finite, τ_i as analytic_tau.
struct AnalyticResult {
    double r = 0;                          // NaN when any compared y_i is NaN
    int64_t worst = -1;                    // index of max ratio
    int64_t first_violation = -1;          // first index with ratio > 1 (or NaN)
    int64_t violations = 0;
    int64_t compared = 0;
    double tau_at_worst = 0, err_at_worst = 0;
    bool pass() const { return r <= 1.0; }   // false for NaN
};
AnalyticResult analytic_ratio(const Tensor& y, const Tensor& ystar, const Tensor& scale, int64_t k,
                              const ErrorModelParams& p);

// err(y) = max_i |y_i − y*_i| / (max_i |y*_i| + tiny), over positions where y* is finite.
struct EnvelopeErr {
    double err = 0;                        // NaN if y is NaN where y* is finite
    int64_t worst = -1;
};
EnvelopeErr envelope_err(const Tensor& y, const Tensor& ystar);

// Envelope model ratio: err(candidate) / (factor · max(err(controls), err_floor)).
double envelope_ratio(double err_candidate, double err_controls_max, double err_floor, double factor);

}  // namespace kcv
