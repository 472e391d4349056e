// The native backend: a candidate is a shared library exporting kcv_kernel (kcv_kernel.h).
#include <dlfcn.h>

#include <string>
#include <vector>

#include "kcv/execution.hpp"

namespace kcv {
namespace {

class NativeBackend final : public Backend {
public:
    explicit NativeBackend(const std::string& path) : path_(path) {
        // RTLD_LOCAL keeps two candidates' symbols apart; RTLD_NOW reports a missing symbol at
        // load time rather than at the first call.
        handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle_) {
            const char* why = dlerror();
            throw BackendError("cannot load candidate '" + path + "': " + (why ? why : "unknown error"));
        }
        kernel_ = reinterpret_cast<kcv_kernel_fn>(dlsym(handle_, "kcv_kernel"));
        if (!kernel_) {
            dlclose(handle_);
            throw BackendError("candidate '" + path + "' does not export kcv_kernel");
        }
        name_fn_ = reinterpret_cast<kcv_kernel_name_fn>(dlsym(handle_, "kcv_kernel_name"));
        error_fn_ = reinterpret_cast<kcv_kernel_last_error_fn>(dlsym(handle_, "kcv_kernel_last_error"));
        resources_fn_ = reinterpret_cast<kcv_kernel_resources_fn>(dlsym(handle_, "kcv_kernel_resources"));
    }
    ~NativeBackend() override { dlclose(handle_); }

    std::string name() const override {
        if (name_fn_) {
            if (const char* n = name_fn_()) return n;
        }
        return path_;
    }

    int call(const Contract& c, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
             std::string* error) override {
        std::vector<DLTensor> in, out;
        in.reserve(inputs.size());
        out.reserve(outputs.size());
        for (auto& t : inputs) in.push_back(t.dlpack());
        for (auto& t : outputs) out.push_back(t.dlpack());
        std::vector<kcv_attribute> attrs;
        for (const auto& [k, v] : c.attributes) attrs.push_back({k.c_str(), v});

        kcv_call call{};
        call.abi_version = KCV_ABI_VERSION;
        call.contract_id = c.id.c_str();
        call.n_inputs = static_cast<int32_t>(in.size());
        call.inputs = in.data();
        call.n_outputs = static_cast<int32_t>(out.size());
        call.outputs = out.data();
        call.n_attributes = static_cast<int32_t>(attrs.size());
        call.attributes = attrs.data();
        call.stream = nullptr;
        int status = kernel_(&call);
        if (status != 0 && error) {
            const char* msg = error_fn_ ? error_fn_() : nullptr;
            *error = msg ? msg : "kernel returned status " + std::to_string(status);
        }
        return status;
    }

    bool resources(kcv_resources* out) override {
        if (!resources_fn_) return false;
        *out = kcv_resources{-1, -1, -1, -1, -1, 0};
        return resources_fn_(out) == 0;
    }

private:
    std::string path_;
    void* handle_ = nullptr;
    kcv_kernel_fn kernel_ = nullptr;
    kcv_kernel_name_fn name_fn_ = nullptr;
    kcv_kernel_last_error_fn error_fn_ = nullptr;
    kcv_kernel_resources_fn resources_fn_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> load_native(const std::string& path) {
    return std::make_unique<NativeBackend>(path);
}

}  // namespace kcv
