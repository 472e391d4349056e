// The executor: turns a Probe into a ProbeOutcome. For each call of the probe, in order, on one
// loaded candidate: draw the inputs (a pure function of the call's seed), compute the float64
// reference, run the positive controls on copies, then run the candidate on guarded buffers
// under the call's ambient state, and record what it did. It judges nothing.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "kcv/error_model.hpp"
#include "kcv/execution.hpp"
#include "kcv/oracle.hpp"
#include "kcv/rng.hpp"

namespace kcv {
namespace {

// Applies an Env for the duration of one candidate call and restores the verifier's own state
// afterwards, also when the candidate changed it.
class AmbientState {
public:
    explicit AmbientState(const Env& env) {
#if defined(__x86_64__)
        saved_csr_ = _mm_getcsr();
        unsigned csr = saved_csr_;
        if (env.ftz) csr |= 0x8000u;   // MXCSR.FTZ
        if (env.daz) csr |= 0x0040u;   // MXCSR.DAZ
        _mm_setcsr(csr);
#endif
        if (env.threads > 0) {
            if (const char* old = std::getenv("OMP_NUM_THREADS")) saved_threads_ = old;
            setenv("OMP_NUM_THREADS", std::to_string(env.threads).c_str(), 1);
            threads_set_ = true;
        }
    }
    ~AmbientState() {
#if defined(__x86_64__)
        _mm_setcsr(saved_csr_);
#endif
        if (threads_set_) {
            if (saved_threads_) setenv("OMP_NUM_THREADS", saved_threads_->c_str(), 1);
            else unsetenv("OMP_NUM_THREADS");
        }
    }
    AmbientState(const AmbientState&) = delete;
    AmbientState& operator=(const AmbientState&) = delete;

private:
    unsigned saved_csr_ = 0;
    bool threads_set_ = false;
    std::optional<std::string> saved_threads_;
};

bool is_float(DType t) { return info(t).is_float; }

const InputOverride* override_for(const Probe& p, const InputSpec& spec) {
    const InputOverride* any = nullptr;
    for (const auto& o : p.overrides) {
        if (o.input == spec.name) return &o;
        if (o.input.empty()) any = &o;
    }
    return any;
}

// Index inputs get values outside [a, b] at every seventh position, both above and below.
void plant_out_of_range(Tensor& t, const InputSpec& spec) {
    const int64_t hi = static_cast<int64_t>(spec.distribution.b);
    for (int64_t i = 0; i < t.numel(); i += 7) {
        t.set(i, (i / 7) % 2 == 0 ? static_cast<double>(hi + 1 + (i % 5)) : -1.0);
    }
}

std::string describe_damage(const std::string& what, const std::vector<GuardDamage>& damage) {
    std::string s;
    for (const auto& d : damage) {
        if (!s.empty()) s += "; ";
        s += what + ": " + (d.before ? "band before" : "band after") + ", first changed byte at +" +
             std::to_string(d.first_offset) + ", " + std::to_string(d.bytes_changed) + " bytes changed";
    }
    return s;
}

std::vector<Tensor> clone_all(const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    out.reserve(ts.size());
    for (const auto& t : ts) out.push_back(t.clone());
    return out;
}

std::vector<Tensor> fresh_outputs(const Contract& c, const std::vector<std::vector<int64_t>>& shapes,
                                  Poison fill, const Probe& p) {
    std::vector<Tensor> outs;
    for (size_t i = 0; i < c.outputs.size(); ++i) {
        outs.push_back(Tensor::empty(c.outputs[i].dtype, shapes[i], Layout{}, fill, p.guard_bytes));
        outs.back().buf->poison_guards(p.guard_poison);
    }
    return outs;
}

// The probe's priming call (Probe::prime_dims): the contract's own input distribution at those
// dimensions, fresh outputs; what the candidate returns or writes is not looked at.
void prime(const ExecContext& ctx, const Probe& probe) {
    const Contract& c = ctx.contract;
    DimValues dims = nominal_dims(c);
    for (const auto& [k, v] : probe.prime_dims) dims[k] = v;
    std::vector<Tensor> inputs;
    for (const InputSpec& in : c.inputs) {
        Tensor t = Tensor::empty(in.dtype, eval_shape(in.shape, dims), Layout{}, Poison::bytes(0), probe.guard_bytes);
        fill(t, in, Family{}, derive_seed(probe.prime_seed, in.name.c_str()));
        inputs.push_back(std::move(t));
    }
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& o : c.outputs) shapes.push_back(eval_shape(o.shape, dims));
    std::vector<Tensor> outs = fresh_outputs(c, shapes, Poison::bytes(0xFF), probe);
    std::string ignored;
    ctx.candidate.call(c, inputs, outs, &ignored);
}

}  // namespace

ProbeOutcome execute(const ExecContext& ctx, const Probe& probe) {
    const Contract& c = ctx.contract;
    ProbeOutcome out;
    out.probe = probe;

    DimValues dims = nominal_dims(c);
    for (const auto& [k, v] : probe.dims) dims[k] = v;
    for (const auto& o : c.outputs) {
        out.output_shapes.push_back(eval_shape(o.shape, dims));
        out.k.push_back(eval_dim_expr(o.k, dims));
    }
    kcv_resources res{};
    if (ctx.candidate.resources(&res)) out.resources = res;

    if (!probe.prime_dims.empty()) prime(ctx, probe);

    for (const CallSpec& spec : probe.calls) {
        CallOutcome co;
        co.spec = spec;

        for (size_t j = 0; j < c.inputs.size(); ++j) {
            const InputSpec& in = c.inputs[j];
            const Layout layout = c.semantics.strided_inputs ? probe.layout : Layout{};
            Tensor t = Tensor::empty(in.dtype, eval_shape(in.shape, dims), layout, Poison::bytes(0),
                                     probe.guard_bytes);
            t.buf->poison_guards(probe.guard_poison);
            const uint64_t seed = derive_seed(spec.input_seed, in.name.c_str());
            const InputOverride* ov = override_for(probe, in);
            fill(t, in, ov ? ov->family : (is_float(in.dtype) ? probe.family : Family{}), seed);
            if (ov && ov->specials) {
                auto hit = inject(t, in, *ov->specials, derive_seed(seed, "specials"));
                if (out.injected.empty()) out.injected = std::move(hit);
            }
            if (probe.out_of_range_indices && in.index) plant_out_of_range(t, in);
            co.inputs.push_back(std::move(t));
        }

        try {
            run_oracle(c.oracle, co.inputs, c.attributes, out.output_shapes, co.reference, co.scale, {}, nullptr,
                       operand_floor(c));
        } catch (const OracleError& e) {
            // A refusal is a fact about these inputs (an index out of range under "raise").
            co.reference.clear();
            co.scale.clear();
            co.reference_error = e.what();
        }

        if (probe.with_controls) {
            for (Backend* control : ctx.controls) {
                std::vector<Tensor> in = clone_all(co.inputs);
                std::vector<Tensor> outs = fresh_outputs(c, out.output_shapes, Poison::bytes(0), probe);
                std::string err;
                co.control_status.push_back(control->call(c, in, outs, &err));
                co.controls.push_back(std::move(outs));
            }
        }

        std::vector<Tensor> outs = fresh_outputs(c, out.output_shapes, spec.output_poison, probe);
        CallFacts& f = co.facts;
        for (const auto& t : co.inputs) {
            f.input_hash_before.push_back(t.hash_storage());
            f.input_ranges.push_back(t.address_range());
        }
        for (const auto& t : outs) f.output_ranges.push_back(t.address_range());

        const auto t0 = std::chrono::steady_clock::now();
        {
            AmbientState state(spec.env);
            f.status = ctx.candidate.call(c, co.inputs, outs, &f.error);
        }
        f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        for (size_t j = 0; j < co.inputs.size(); ++j) {
            f.input_hash_after.push_back(co.inputs[j].hash_storage());
            auto d = co.inputs[j].buf->check_guards();
            if (!d.empty()) f.guard_damage.push_back(describe_damage("input " + c.inputs[j].name, d));
        }
        for (size_t j = 0; j < outs.size(); ++j) {
            auto d = outs[j].buf->check_guards();
            if (!d.empty()) f.guard_damage.push_back(describe_damage("output " + c.outputs[j].name, d));
        }
        co.outputs = std::move(outs);
        out.calls.push_back(std::move(co));
    }
    return out;
}

}  // namespace kcv
