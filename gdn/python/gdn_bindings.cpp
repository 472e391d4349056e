// The oracle's Python bindings (see gdn_bindings.hpp). Shapes are read from q and v and checked
// against every operand before the oracle runs, so a wrong shape is a ValueError, never a read
// out of bounds.
#include "gdn_bindings.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../oracle/gdn_oracle.hpp"

namespace nb = nanobind;

namespace kcv::gdn {
namespace {

using In = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using Out = nb::ndarray<nb::numpy, double>;

std::string shape_text(const In& a) {
    std::string s = "[";
    for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
    return s + "]";
}

void expect(const char* name, const In& a, const std::vector<int64_t>& shape) {
    bool ok = a.ndim() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i) ok = int64_t(a.shape(i)) == shape[i];
    if (ok) return;
    std::string want = "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    throw nb::value_error((std::string(name) + " has shape " + shape_text(a) + ", expected " + want + "]").c_str());
}

Problem make_problem(const std::string& member, const In& q, const In& v, double scale,
                     const std::optional<std::vector<int64_t>>& cu) {
    if (q.ndim() != 4 || v.ndim() != 4) throw nb::value_error("q must be [B,T,H,K] and v [B,T,HV,V]");
    Problem p;
    try {
        p.member = member_from_name(member);
    } catch (const std::invalid_argument& e) {
        throw nb::value_error(e.what());
    }
    p.shape = Shape{int64_t(q.shape(0)), int64_t(q.shape(1)), int64_t(q.shape(2)), int64_t(v.shape(2)),
                    int64_t(q.shape(3)), int64_t(v.shape(3)), cu.value_or(std::vector<int64_t>{})};
    p.scale = scale;
    try {
        validate(p);
    } catch (const std::invalid_argument& e) {
        throw nb::value_error(e.what());
    }
    return p;
}

// Checks the operands common to both directions; returns their data pointers.
struct Common {
    const double *q, *k, *v, *g, *beta, *h0;
};
Common check_common(const Problem& p, const In& q, const In& k, const In& v, const std::optional<In>& g,
                    const std::optional<In>& beta, const std::optional<In>& h0) {
    const Shape& s = p.shape;
    expect("q", q, {s.B, s.T, s.H, s.K});
    expect("k", k, {s.B, s.T, s.H, s.K});
    expect("v", v, {s.B, s.T, s.HV, s.V});
    Common c{q.data(), k.data(), v.data(), nullptr, nullptr, nullptr};
    if (p.member.gate != GateKind::none) {
        if (!g) throw nb::value_error("this member needs g");
        if (p.member.gate == GateKind::scalar) expect("g", *g, {s.B, s.T, s.HV});
        else expect("g", *g, {s.B, s.T, s.HV, s.K});
        c.g = g->data();
    }
    if (p.member.delta) {
        if (!beta) throw nb::value_error("this member needs beta");
        expect("beta", *beta, {s.B, s.T, s.HV});
        c.beta = beta->data();
    }
    if (h0) {
        expect("h0", *h0, {s.sequences(), s.HV, s.K, s.V});
        c.h0 = h0->data();
    }
    return c;
}

// A new numpy array owning a copy of `values`.
Out to_numpy(std::vector<double> values, std::vector<size_t> shape) {
    auto* owned = new std::vector<double>(std::move(values));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
    return Out(owned->data(), shape.size(), shape.data(), owner);
}

std::vector<size_t> dims(std::initializer_list<int64_t> d) { return {d.begin(), d.end()}; }

}  // namespace

void bind_oracle(nb::module_& m) {
    m.def(
        "gdn_oracle_forward",
        [](const std::string& member, const In& q, const In& k, const In& v, const std::optional<In>& g,
           const std::optional<In>& beta, const std::optional<In>& h0, double scale,
           const std::optional<std::vector<int64_t>>& cu_seqlens, double operand_floor) {
            const Problem p = make_problem(member, q, v, scale, cu_seqlens);
            const Common c = check_common(p, q, k, v, g, beta, h0);
            const Shape& s = p.shape;
            std::vector<double> o(s.v_size()), os(s.v_size()), ht(s.state_size()), hts(s.state_size());
            {
                nb::gil_scoped_release release;
                forward(p, {c.q, c.k, c.v, c.g, c.beta, c.h0, o.data(), ht.data(), os.data(), hts.data(), operand_floor});
            }
            nb::dict r;
            const auto vshape = dims({s.B, s.T, s.HV, s.V}), sshape = dims({s.sequences(), s.HV, s.K, s.V});
            r["o"] = to_numpy(std::move(o), vshape);
            r["o_scale"] = to_numpy(std::move(os), vshape);
            r["ht"] = to_numpy(std::move(ht), sshape);
            r["ht_scale"] = to_numpy(std::move(hts), sshape);
            return r;
        },
        nb::arg("member"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(), nb::arg("beta").none(),
        nb::arg("h0").none(), nb::arg("scale"), nb::arg("cu_seqlens").none(), nb::arg("operand_floor") = 0.0,
        "The float64 token-by-token recurrence: outputs, final state and their magnitude scales, every "
        "operand's magnitude floored at operand_floor in the scales (0: unfloored).");
    m.def(
        "gdn_oracle_backward",
        [](const std::string& member, const In& q, const In& k, const In& v, const std::optional<In>& g,
           const std::optional<In>& beta, const std::optional<In>& h0, const In& d_o, const std::optional<In>& dht,
           double scale, const std::optional<std::vector<int64_t>>& cu_seqlens, double operand_floor) {
            const Problem p = make_problem(member, q, v, scale, cu_seqlens);
            const Common c = check_common(p, q, k, v, g, beta, h0);
            const Shape& s = p.shape;
            expect("do", d_o, {s.B, s.T, s.HV, s.V});
            if (dht) expect("dht", *dht, {s.sequences(), s.HV, s.K, s.V});
            std::vector<double> dq(s.qk_size()), dk(s.qk_size()), dv(s.v_size()), dg(s.g_size(p.member.gate)),
                dbeta(s.beta_size()), dh0(s.state_size());
            std::vector<double> dqs = dq, dks = dk, dvs = dv, dgs = dg, dbetas = dbeta, dh0s = dh0;
            {
                nb::gil_scoped_release release;
                BackwardArgs a;
                a.q = c.q; a.k = c.k; a.v = c.v; a.g = c.g; a.beta = c.beta; a.h0 = c.h0;
                a.d_o = d_o.data();
                a.dht = dht ? dht->data() : nullptr;
                a.dq = dq.data(); a.dk = dk.data(); a.dv = dv.data(); a.dg = dg.data(); a.dbeta = dbeta.data();
                a.dh0 = dh0.data();
                a.dq_scale = dqs.data(); a.dk_scale = dks.data(); a.dv_scale = dvs.data(); a.dg_scale = dgs.data();
                a.dbeta_scale = dbetas.data(); a.dh0_scale = dh0s.data();
                a.operand_floor = operand_floor;
                backward(p, a);
            }
            nb::dict r;
            const auto qshape = dims({s.B, s.T, s.H, s.K}), vshape = dims({s.B, s.T, s.HV, s.V});
            const auto sshape = dims({s.sequences(), s.HV, s.K, s.V});
            r["dq"] = to_numpy(std::move(dq), qshape);
            r["dq_scale"] = to_numpy(std::move(dqs), qshape);
            r["dk"] = to_numpy(std::move(dk), qshape);
            r["dk_scale"] = to_numpy(std::move(dks), qshape);
            r["dv"] = to_numpy(std::move(dv), vshape);
            r["dv_scale"] = to_numpy(std::move(dvs), vshape);
            r["dh0"] = to_numpy(std::move(dh0), sshape);
            r["dh0_scale"] = to_numpy(std::move(dh0s), sshape);
            if (p.member.gate != GateKind::none) {
                const auto gshape = p.member.gate == GateKind::scalar ? dims({s.B, s.T, s.HV}) : dims({s.B, s.T, s.HV, s.K});
                r["dg"] = to_numpy(std::move(dg), gshape);
                r["dg_scale"] = to_numpy(std::move(dgs), gshape);
            }
            if (p.member.delta) {
                r["dbeta"] = to_numpy(std::move(dbeta), dims({s.B, s.T, s.HV}));
                r["dbeta_scale"] = to_numpy(std::move(dbetas), dims({s.B, s.T, s.HV}));
            }
            return r;
        },
        nb::arg("member"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(), nb::arg("beta").none(),
        nb::arg("h0").none(), nb::arg("do"), nb::arg("dht").none(), nb::arg("scale"), nb::arg("cu_seqlens").none(),
        nb::arg("operand_floor") = 0.0,
        "The exact adjoint of gdn_oracle_forward for <do, o> + <dht, ht>, with magnitude scales (floored as "
        "gdn_oracle_forward's).");
}

}  // namespace kcv::gdn
