// The recurrence's CUDA kernels as native candidates (kernels/gdn/cuda, built into
// <kernel dir>/cuda where CUDA is enabled): without a GPU they must load, name every contract of
// the family that exists and no other, and refuse calls they cannot serve with a message before
// touching the device. Their verdicts on a GPU come from `kcv verify` (bench/audit_device_run.sh,
// step gdn-gates).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/contract.hpp"
#include "kcv/kcv_kernel.h"
#include "loaded_library.hpp"

#ifndef KCV_TEST_KERNEL_DIR
#define KCV_TEST_KERNEL_DIR "build/out/kernels"
#endif

namespace {

namespace fs = std::filesystem;

// A candidate library of the build, cuda/kcv_gdn_<kind>.so.
struct Candidate : kcv::testing::LoadedLibrary {
    explicit Candidate(const std::string& kind)
        : LoadedLibrary(std::string(KCV_TEST_KERNEL_DIR) + "/cuda/kcv_gdn_" + kind + ".so") {}
};

#define KCV_REQUIRE_GDN_CANDIDATES()                                                            \
    do {                                                                                        \
        if (!fs::exists(std::string(KCV_TEST_KERNEL_DIR) + "/cuda/kcv_gdn_forward.so"))         \
            GTEST_SKIP() << "the recurrence's CUDA candidates were not built (CUDA not enabled)"; \
    } while (0)

TEST(GdnCudaCandidates, ManifestsNameEveryContractOfTheirDirection) {
    KCV_REQUIRE_GDN_CANDIDATES();
    for (const std::string kind : {"forward", "backward"}) {
        SCOPED_TRACE(kind);
        Candidate lib(kind);
        ASSERT_NE(lib.handle, nullptr) << dlerror();
        EXPECT_EQ(lib.text("kcv_kernel_device"), "cuda");
        EXPECT_NE(lib.get<kcv_kernel_fn>("kcv_kernel"), nullptr);
        // The kernels' own C interface is compiled in and stays hidden.
        EXPECT_EQ(lib.get<void*>("kcv_gdn_forward"), nullptr);
        const auto m = nlohmann::json::parse(lib.text("kcv_kernel_manifest"));
        EXPECT_EQ(m.at("name"), "gdn_" + kind);
        EXPECT_EQ(m.at("device"), "cuda");
        std::vector<std::string> named = m.at("contracts").get<std::vector<std::string>>();
        std::sort(named.begin(), named.end());
        std::vector<std::string> builtin;
        for (const std::string& id : kcv::builtin_contract_ids())
            if (id.starts_with("gdn-" + kind + "-")) builtin.push_back(id);
        EXPECT_EQ(named, builtin);
        EXPECT_EQ(builtin.size(), 20u) << "five members in f32, bf16 and f16, and with bf16 operands";
    }
}

// A call the candidate cannot serve is refused with a message, never a crash, and before any
// CUDA call: here with host tensors, and with an operand list that does not match the attributes.
TEST(GdnCudaCandidates, RefuseHostTensorsAndWrongOperandLists) {
    KCV_REQUIRE_GDN_CANDIDATES();
    Candidate lib("forward");
    ASSERT_NE(lib.handle, nullptr) << dlerror();
    auto kernel = lib.get<kcv_kernel_fn>("kcv_kernel");
    ASSERT_NE(kernel, nullptr);

    int64_t qk_shape[4] = {1, 3, 1, 4}, v_shape[4] = {1, 3, 1, 4}, g_shape[3] = {1, 3, 1};
    std::vector<float> q(12, 0.5f), k(12, 0.25f), v(12, 1.0f), g(3, -0.5f), o(12, 0.0f);
    auto tensor = [](std::vector<float>& data, int64_t* shape, int ndim) {
        DLTensor t{};
        t.data = data.data();
        t.device = {kDLCPU, 0};
        t.ndim = ndim;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = shape;
        return t;
    };
    DLTensor inputs[4] = {tensor(q, qk_shape, 4), tensor(k, qk_shape, 4), tensor(v, v_shape, 4), tensor(g, g_shape, 3)};
    DLTensor outputs[1] = {tensor(o, v_shape, 4)};
    kcv_attribute gate{"gate", 1};

    kcv_call call{};
    call.abi_version = KCV_ABI_VERSION;
    call.contract_id = "gdn-forward-ssd";
    call.inputs = inputs;
    call.n_inputs = 4;
    call.outputs = outputs;
    call.n_outputs = 1;
    call.attributes = &gate;
    call.n_attributes = 1;
    EXPECT_NE(kernel(&call), 0);
    EXPECT_NE(lib.text("kcv_kernel_last_error").find("device memory"), std::string::npos) << lib.text("kcv_kernel_last_error");

    call.n_inputs = 3;   // gate 1 needs g
    EXPECT_NE(kernel(&call), 0);
    EXPECT_NE(lib.text("kcv_kernel_last_error").find("expected 4 inputs"), std::string::npos)
        << lib.text("kcv_kernel_last_error");
    for (float x : o) EXPECT_EQ(x, 0.0f);
}

}  // namespace
