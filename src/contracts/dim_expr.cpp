#include "dim_expr.hpp"

#include "kcv/contract.hpp"
#include "vocabulary.hpp"

namespace kcv {

namespace contracts {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

[[noreturn]] void bad(const std::string& expr, size_t pos, const std::string& problem) {
    throw ContractError("bad expression " + quote(expr) + " at position " + std::to_string(pos) + ": " + problem);
}

}  // namespace

std::vector<DimFactor> parse_dim_expr(const std::string& expr) {
    std::vector<DimFactor> factors;
    size_t i = 0;
    auto skip_space = [&] {
        while (i < expr.size() && is_space(expr[i])) ++i;
    };
    while (true) {
        skip_space();
        if (i == expr.size()) bad(expr, i, "expected a dimension name or a positive integer");
        DimFactor f;
        if (is_digit(expr[i])) {
            size_t start = i;
            int64_t v = 0;
            for (; i < expr.size() && is_digit(expr[i]); ++i)
                if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, expr[i] - '0', &v))
                    bad(expr, start, "integer out of range");
            if (v == 0) bad(expr, start, "a size must be positive");
            f.value = v;
        } else if (is_name_start(expr[i])) {
            size_t start = i;
            while (i < expr.size() && (is_name_start(expr[i]) || is_digit(expr[i]))) ++i;
            f.name = expr.substr(start, i - start);
        } else {
            bad(expr, i, "expected a dimension name or a positive integer, found " + quote(expr.substr(i, 1)));
        }
        factors.push_back(std::move(f));
        skip_space();
        if (i == expr.size()) return factors;
        if (expr[i] != '*') bad(expr, i, "expected '*' or the end, found " + quote(expr.substr(i, 1)));
        ++i;
    }
}

}  // namespace contracts

const Dim* Contract::dim(const std::string& name) const {
    for (const Dim& d : dims)
        if (d.name == name) return &d;
    return nullptr;
}

DimValues nominal_dims(const Contract& c) {
    DimValues v;
    for (const Dim& d : c.dims) v[d.name] = d.nominal;
    return v;
}

int64_t eval_dim_expr(const std::string& expr, const DimValues& dims) {
    int64_t product = 1;
    for (const contracts::DimFactor& f : contracts::parse_dim_expr(expr)) {
        int64_t v = f.value;
        if (!f.name.empty()) {
            auto it = dims.find(f.name);
            if (it == dims.end())
                throw ContractError("unknown dimension " + contracts::quote(f.name) + " in " + contracts::quote(expr));
            v = it->second;
        }
        if (__builtin_mul_overflow(product, v, &product))
            throw ContractError("expression " + contracts::quote(expr) + " overflows 64-bit integers");
    }
    return product;
}

std::vector<int64_t> eval_shape(const std::vector<std::string>& shape, const DimValues& dims) {
    std::vector<int64_t> out;
    out.reserve(shape.size());
    for (const std::string& s : shape) out.push_back(eval_dim_expr(s, dims));
    return out;
}

}  // namespace kcv
