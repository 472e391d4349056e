// The shrink driver of kcv disputes, over trials that a fake decides: which size it keeps, that it
// never keeps a step where a positive control fails, that it stops at max_trials; and the pieces
// the Python path is built from (the override's JSON, its checks, the worker request, the replay).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kcv/disputes.hpp"

using namespace kcv;
using nlohmann::json;

namespace {

Dim free_dim(const std::string& name, int64_t nominal, int64_t lo = 1, int64_t hi = 1 << 20) {
    Dim d;
    d.name = name;
    d.nominal = nominal;
    d.free = true;
    d.min = lo;
    d.max = hi;
    return d;
}

Probe probe_at(const DimValues& dims) {
    Probe p;
    p.gate = "CMP-01";
    p.id = "CMP-01/test";
    p.dims = dims;
    return p;
}

// A fake trial: the verdict and the controls' outcome are functions of the override on top of
// the planned dims. Counts every call and every distinct override it was asked for.
struct Fake {
    DimValues planned;
    std::function<bool(const DimValues&, const ProbeOverride&)> fails;
    std::function<ShrinkTrial::Controls(const DimValues&)> controls = [](const DimValues&) {
        return ShrinkTrial::Controls::pass;
    };
    int calls = 0;
    std::set<std::string> asked;
    bool repeated = false;

    ShrinkTrialFn fn() {
        return [this](const ProbeOverride& o) {
            ++calls;
            repeated = repeated || !asked.insert(to_json(o).dump()).second;
            DimValues d = planned;
            for (const auto& [k, v] : o.dims) d[k] = v;
            ShrinkTrial t;
            t.result.id = "CMP-01";
            t.result.verdict = fails(d, o) ? Verdict::fail : Verdict::pass;
            // The metric names the dims the result belongs to: N * 1000 + R.
            t.result.metric = double(d["N"] * 1000 + (d.count("R") ? d["R"] : 0));
            if (t.result.verdict == Verdict::fail) t.controls = controls(d);
            return t;
        };
    }
};

}  // namespace

TEST(Shrink, KeepsTheSmallestFailingSizeOfEachFreeDimension) {
    Fake f;
    f.planned = {{"N", 100}, {"R", 40}, {"F", 5}};
    f.fails = [](const DimValues& d, const ProbeOverride&) { return d.at("N") >= 17; };
    Dim fixed;
    fixed.name = "F";
    fixed.nominal = 5;
    const ShrinkResult s = shrink_probe(probe_at(f.planned), {free_dim("N", 100), free_dim("R", 40, 3), fixed}, f.fn());
    ASSERT_TRUE(s.reproduced) << s.note;
    // 17 is the first size of the ladder (1..7, 8, 9, 15, 16, 17, ...) that still fails; R fails at
    // any size and stops at its minimum 3; F is not free.
    EXPECT_EQ(s.dims, (DimValues{{"N", 17}, {"R", 3}, {"F", 5}}));
    EXPECT_EQ(s.original_dims, f.planned);
    EXPECT_EQ(s.applied.dims, (DimValues{{"N", 17}, {"R", 3}}));
    EXPECT_EQ(s.result.verdict, Verdict::fail);
    EXPECT_EQ(s.result.metric, 17003.0);
    // 1 unshrunk + 12 sizes of N up to 17 + R = 3; round two retries N below 17 at R = 3 (11).
    EXPECT_EQ(f.calls, 25);
    EXPECT_EQ(s.trials.size(), 25u);
    EXPECT_FALSE(f.repeated) << "an override was tried twice";
    EXPECT_EQ(s.note, "");
    EXPECT_EQ(s.trials[0]["override"], json::object());
    EXPECT_EQ(s.trials[1]["override"], json({{"dims", {{"N", 1}}}}));
    EXPECT_EQ(s.trials[1]["verdict"], "pass");
    EXPECT_EQ(s.trials[1]["controls"], "-");
}

TEST(Shrink, NeverKeepsAStepWhereTheControlFailsOrDidNotRun) {
    Fake f;
    f.planned = {{"N", 100}};
    f.fails = [](const DimValues&, const ProbeOverride&) { return true; };
    // The control fails below 9; at 9 it did not run (a worker that died before saying).
    f.controls = [](const DimValues& d) {
        if (d.at("N") < 9) return ShrinkTrial::Controls::fail;
        if (d.at("N") == 9) return ShrinkTrial::Controls::not_run;
        return ShrinkTrial::Controls::pass;
    };
    const ShrinkResult s = shrink_probe(probe_at(f.planned), {free_dim("N", 100)}, f.fn());
    ASSERT_TRUE(s.reproduced) << s.note;
    EXPECT_EQ(s.dims.at("N"), 15);
    EXPECT_EQ(s.result.verdict, Verdict::fail);
    EXPECT_EQ(s.result.metric, 15000.0);
    int control_failed = 0;
    for (const auto& t : s.trials) {
        const int64_t n = t["override"].contains("dims") ? t["override"]["dims"]["N"].get<int64_t>() : 100;
        EXPECT_EQ(t["verdict"], "fail") << t.dump();
        EXPECT_EQ(t["controls"], n < 9 ? "fail" : n == 9 ? "-" : "pass") << t.dump();
        control_failed += t["controls"] == "fail";
    }
    EXPECT_EQ(control_failed, 8);   // 1..8, none of them kept
}

TEST(Shrink, AControlFailingTheUnshrunkProbeMeansNotReproduced) {
    Fake f;
    f.planned = {{"N", 64}};
    f.fails = [](const DimValues&, const ProbeOverride&) { return true; };
    f.controls = [](const DimValues&) { return ShrinkTrial::Controls::fail; };
    const ShrinkResult s = shrink_probe(probe_at(f.planned), {free_dim("N", 64)}, f.fn());
    EXPECT_FALSE(s.reproduced);
    EXPECT_EQ(f.calls, 1);
    EXPECT_EQ(s.dims, f.planned);
    EXPECT_EQ(s.result.verdict, Verdict::na);
    EXPECT_NE(s.note.find("a positive control fails here too"), std::string::npos) << s.note;
}

TEST(Shrink, APassingProbeIsNotShrunk) {
    Fake f;
    f.planned = {{"N", 64}};
    f.fails = [](const DimValues&, const ProbeOverride&) { return false; };
    const ShrinkResult s = shrink_probe(probe_at(f.planned), {free_dim("N", 64)}, f.fn());
    EXPECT_FALSE(s.reproduced);
    EXPECT_EQ(f.calls, 1);
    EXPECT_NE(s.note.find("did not fail again"), std::string::npos) << s.note;
}

TEST(Shrink, StopsAtMaxTrials) {
    for (int max_trials : {1, 2, 3, 7}) {
        Fake f;
        f.planned = {{"N", 100}, {"R", 50}};
        f.fails = [](const DimValues& d, const ProbeOverride&) { return d.at("N") >= 60; };
        const ShrinkResult s =
            shrink_probe(probe_at(f.planned), {free_dim("N", 100), free_dim("R", 50)}, f.fn(), max_trials);
        EXPECT_EQ(f.calls, max_trials) << max_trials;
        EXPECT_EQ(s.trials.size(), size_t(max_trials)) << max_trials;
        EXPECT_EQ(s.note, "stopped after " + std::to_string(max_trials) + " trials");
        EXPECT_TRUE(s.reproduced);
        // N fails only from 60 on, so no size of N below it was kept within 7 trials.
        EXPECT_EQ(s.dims, f.planned) << max_trials;
    }
}

TEST(Shrink, ReducesTheValuesAfterTheDimensions) {
    Fake f;
    f.planned = {{"N", 8}};
    // Fails from a band scale of 100 on, and with a single special value too.
    f.fails = [](const DimValues& d, const ProbeOverride& o) {
        return d.at("N") >= 4 && (!o.family_scale || *o.family_scale >= 100);
    };
    Probe p = probe_at(f.planned);
    p.family = Family::of(Family::Kind::band, 1e4);
    InputOverride ov;
    ov.specials = Specials{};
    p.overrides.push_back(ov);
    const ShrinkResult s = shrink_probe(p, {free_dim("N", 8)}, f.fn());
    ASSERT_TRUE(s.reproduced);
    EXPECT_EQ(s.dims.at("N"), 4);
    ASSERT_TRUE(s.applied.family_scale.has_value());
    EXPECT_EQ(*s.applied.family_scale, 100.0);
    EXPECT_TRUE(s.applied.single_special);
    EXPECT_EQ(to_json(s.applied), json({{"dims", {{"N", 4}}}, {"family_scale", 100.0}, {"single_special", true}}));
    EXPECT_FALSE(f.repeated);
}

TEST(Shrink, OverrideJsonRoundTripsAndRejectsMalformedFields) {
    ProbeOverride o;
    o.dims = {{"M", 65}, {"K", 1}};
    o.family_scale = 10;
    o.single_special = true;
    json j = to_json(o);
    j["probe"] = "CMP-01/M=65";   // the worker's field, ignored here
    const ProbeOverride back = probe_override_from_json(j);
    EXPECT_EQ(back.dims, o.dims);
    EXPECT_EQ(back.family_scale, o.family_scale);
    EXPECT_TRUE(back.single_special);
    EXPECT_TRUE(probe_override_from_json(json::object()).empty());
    EXPECT_THROW(probe_override_from_json(json{{"dims", {{"M", 1.5}}}}), std::invalid_argument);
    EXPECT_THROW(probe_override_from_json(json{{"dims", {1, 2}}}), std::invalid_argument);
    EXPECT_THROW(probe_override_from_json(json{{"family_scale", -1}}), std::invalid_argument);
    EXPECT_THROW(probe_override_from_json(json{{"single_special", "yes"}}), std::invalid_argument);
    EXPECT_THROW(probe_override_from_json(json::array()), std::invalid_argument);
}

TEST(Shrink, OverrideProblemsAreErrorsWithACode) {
    Contract c;
    c.id = "t";
    c.dims = {free_dim("N", 100, 2, 1000)};
    ProbeOverride o;
    EXPECT_FALSE(override_problem("CMP-01", c, o).has_value());
    o.dims = {{"Q", 3}};
    auto bad = override_problem("CMP-01", c, o);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->verdict, Verdict::error);
    EXPECT_EQ(bad->code, "unknown-dim");
    EXPECT_EQ(bad->id, "CMP-01");
    o.dims = {{"N", 1}};
    EXPECT_EQ(override_problem("CMP-01", c, o)->code, "dim-out-of-range");
    o.dims = {{"N", 2}};
    EXPECT_FALSE(override_problem("CMP-01", c, o).has_value());
}

TEST(Shrink, ApplySetsDimsScaleAndOneSpecialValue) {
    Probe p = probe_at({{"N", 17}, {"R", 4}});
    p.family = Family::of(Family::Kind::band, 1e4);
    InputOverride scattered, single;
    scattered.specials = Specials{};
    single.specials = Specials{};
    single.specials->pattern = Specials::Pattern::single_nan;
    p.overrides = {scattered, single};
    p.note = {{"signature_class", "tail"}};
    ProbeOverride o;
    o.dims = {{"N", 1}};
    o.family_scale = 10;
    o.single_special = true;
    apply(p, o);
    EXPECT_EQ(p.dims, (DimValues{{"N", 1}, {"R", 4}}));
    EXPECT_EQ(p.family.scale, 10.0);
    EXPECT_EQ(p.overrides[0].specials->rate, 0.0);
    EXPECT_EQ(p.overrides[1].specials->rate, Specials{}.rate);   // not scattered: untouched
    EXPECT_EQ(p.note["signature_class"], "tail (shrunk to N=1)");
}

TEST(Shrink, PythonTrialRequestAndReplayCommand) {
    const json record = {{"corpus_id", "runs/a/sample1"},
                         {"reference", "/p/relu.py"},
                         {"candidate", {{"path", "/c/relu nan.py"}}},
                         {"device", "cuda:1"},
                         {"settings", {{"seed", 7}, {"quick", true}, {"c", 4.0}, {"ord03_margin", 1.5}}}};
    ProbeOverride o;
    o.dims = {{"batch_size", 1}, {"dim", 2}};
    o.single_special = true;
    const json req = python_probe_request(record, "EXC-01", "EXC-01/scattered", o);
    EXPECT_EQ(req["reference"], "/p/relu.py");
    EXPECT_EQ(req["candidate"], "/c/relu nan.py");
    EXPECT_EQ(req["device"], "cuda:1");
    EXPECT_EQ(req["seed"], 7);
    EXPECT_EQ(req["gates"], json({"EXC-01"}));
    EXPECT_EQ(req["settings"]["quick"], true);
    EXPECT_EQ(req["settings"]["probe_override"],
              json({{"probe", "EXC-01/scattered"}, {"dims", {{"batch_size", 1}, {"dim", 2}}}, {"single_special", true}}));
    EXPECT_EQ(python_replay_command(record, "EXC-01", "EXC-01/scattered", o),
              "kcv verify --reference /p/relu.py --candidate '/c/relu nan.py' --device cuda --seed 7 --margin 1.5 "
              "--quick --gate EXC-01 --probe EXC-01/scattered --dim batch_size=1 --dim dim=2 --single-special");
    EXPECT_EQ(python_replay_command(record, "EXC-01", "EXC-01/x y", {}),
              "kcv verify --reference /p/relu.py --candidate '/c/relu nan.py' --device cuda --seed 7 --margin 1.5 "
              "--quick --gate EXC-01 --probe 'EXC-01/x y'");
    // A record judged under another probe budget is replayed under it: the budget sets the sizes.
    json budgeted = record;
    budgeted["settings"]["probe_budget_bytes"] = 32768;
    EXPECT_EQ(python_replay_command(budgeted, "EXC-01", "EXC-01/x", {}),
              "kcv verify --reference /p/relu.py --candidate '/c/relu nan.py' --device cuda --seed 7 --margin 1.5 "
              "--quick --probe-budget 0.03125 --gate EXC-01 --probe EXC-01/x");
}
