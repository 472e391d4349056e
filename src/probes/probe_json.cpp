// Probes are plain data: this is their JSON form, so a probe can be stored beside its evidence
// and run again in another process.
#include "kcv/probe.hpp"

namespace kcv {
namespace {

nlohmann::json poison_json(const Poison& p) {
    if (p.kind == Poison::Kind::random) return {{"random", p.seed}};
    return {{"byte", p.byte}};
}
Poison poison_from(const nlohmann::json& j) {
    if (j.contains("random")) return Poison::random(j["random"].get<uint64_t>());
    return Poison::bytes(j.value("byte", uint8_t(0xA5)));
}

const char* kFamilyNames[] = {"task", "signed_normal", "positive", "band", "offset",
                              "near_max", "random_mantissa", "repeated", "subnormal", "below_half_unit"};
nlohmann::json family_json(const Family& f) {
    return {{"kind", kFamilyNames[static_cast<int>(f.kind)]}, {"scale", f.scale}};
}
Family family_from(const nlohmann::json& j) {
    Family f;
    const std::string k = j.value("kind", "task");
    for (size_t i = 0; i < std::size(kFamilyNames); ++i) {
        if (k == kFamilyNames[i]) f.kind = static_cast<Family::Kind>(i);
    }
    f.scale = j.value("scale", 1.0);
    return f;
}

const char* kPatternNames[] = {"scattered", "row_neg_inf", "single_nan"};
const char* kLayoutNames[] = {"contiguous", "transposed", "strided"};

}  // namespace

nlohmann::json to_json(const Probe& p) {
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& c : p.calls) {
        calls.push_back({{"input_seed", c.input_seed},
                         {"output_poison", poison_json(c.output_poison)},
                         {"env", {{"ftz", c.env.ftz}, {"daz", c.env.daz}, {"threads", c.env.threads}}}});
    }
    nlohmann::json overrides = nlohmann::json::array();
    for (const auto& o : p.overrides) {
        nlohmann::json oj = {{"input", o.input}, {"family", family_json(o.family)}};
        if (o.specials) {
            oj["specials"] = {{"pattern", kPatternNames[static_cast<int>(o.specials->pattern)]},
                              {"rate", o.specials->rate},
                              {"kinds", o.specials->kinds}};
        }
        overrides.push_back(oj);
    }
    nlohmann::json j = {{"gate", p.gate},
                        {"id", p.id},
                        {"dims", p.dims},
                        {"family", family_json(p.family)},
                        {"overrides", overrides},
                        {"layout", {{"kind", kLayoutNames[static_cast<int>(p.layout.kind)]},
                                    {"storage_offset", p.layout.storage_offset}}},
                        {"guard_bytes", p.guard_bytes},
                        {"guard_poison", poison_json(p.guard_poison)},
                        {"check_guards", p.check_guards},
                        {"calls", calls},
                        {"with_controls", p.with_controls},
                        {"out_of_range_indices", p.out_of_range_indices}};
    if (!p.prime_dims.empty()) j["prime"] = {{"dims", p.prime_dims}, {"input_seed", p.prime_seed}};
    if (!p.note.is_null()) j["note"] = p.note;
    return j;
}

Probe probe_from_json(const nlohmann::json& j) {
    Probe p;
    p.gate = j.value("gate", "");
    p.id = j.value("id", "");
    p.dims = j.value("dims", DimValues{});
    p.family = family_from(j.value("family", nlohmann::json::object()));
    for (const auto& oj : j.value("overrides", nlohmann::json::array())) {
        InputOverride o;
        o.input = oj.value("input", "");
        o.family = family_from(oj.value("family", nlohmann::json::object()));
        if (oj.contains("specials")) {
            Specials s;
            const std::string pat = oj["specials"].value("pattern", "scattered");
            for (size_t i = 0; i < std::size(kPatternNames); ++i) {
                if (pat == kPatternNames[i]) s.pattern = static_cast<Specials::Pattern>(i);
            }
            s.rate = oj["specials"].value("rate", s.rate);
            s.kinds = oj["specials"].value("kinds", s.kinds);
            o.specials = s;
        }
        p.overrides.push_back(o);
    }
    if (j.contains("layout")) {
        const std::string k = j["layout"].value("kind", "contiguous");
        for (size_t i = 0; i < std::size(kLayoutNames); ++i) {
            if (k == kLayoutNames[i]) p.layout.kind = static_cast<Layout::Kind>(i);
        }
        p.layout.storage_offset = j["layout"].value("storage_offset", int64_t(0));
    }
    p.guard_bytes = j.value("guard_bytes", size_t(GuardedBuffer::kDefaultGuard));
    p.guard_poison = poison_from(j.value("guard_poison", nlohmann::json::object()));
    p.check_guards = j.value("check_guards", false);
    for (const auto& cj : j.value("calls", nlohmann::json::array())) {
        CallSpec c;
        c.input_seed = cj.value("input_seed", uint64_t(0));
        c.output_poison = poison_from(cj.value("output_poison", nlohmann::json::object()));
        if (cj.contains("env")) {
            c.env.ftz = cj["env"].value("ftz", false);
            c.env.daz = cj["env"].value("daz", false);
            c.env.threads = cj["env"].value("threads", 0);
        }
        p.calls.push_back(c);
    }
    p.with_controls = j.value("with_controls", false);
    p.out_of_range_indices = j.value("out_of_range_indices", false);
    if (j.contains("prime")) {
        p.prime_dims = j["prime"].value("dims", DimValues{});
        p.prime_seed = j["prime"].value("input_seed", uint64_t(0));
    }
    if (j.contains("note")) p.note = j["note"];
    return p;
}

}  // namespace kcv
