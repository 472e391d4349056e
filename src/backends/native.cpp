// The native backend: a candidate is a shared library exporting kcv_kernel (kcv_kernel.h).
// A CUDA candidate gets device mirrors of the verifier's guarded host buffers, guard bands
// included, and everything is copied back after the call: guard damage, input mutation and
// unwritten outputs are then judged exactly as for a CPU kernel.
#include <dlfcn.h>

#include <cstring>

#include <string>
#include <vector>

#include "backends/cuda_runtime.hpp"
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
        auto device_fn = reinterpret_cast<kcv_kernel_device_fn>(dlsym(handle_, "kcv_kernel_device"));
        const char* device = device_fn ? device_fn() : "cpu";
        cuda_ = device && std::strcmp(device, "cuda") == 0;
        if (cuda_) CudaRuntime::get();   // fails now, at load, when there is no GPU
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
        if (cuda_) return call_cuda(c, inputs, outputs, error);
        std::vector<DLTensor> in, out;
        in.reserve(inputs.size());
        out.reserve(outputs.size());
        for (auto& t : inputs) in.push_back(t.dlpack());
        for (auto& t : outputs) out.push_back(t.dlpack());
        return invoke(c, in, out, nullptr, error);
    }

    bool resources(kcv_resources* out) override {
        if (!resources_fn_) return false;
        *out = kcv_resources{-1, -1, -1, -1, -1, 0};
        return resources_fn_(out) == 0;
    }

private:
    int invoke(const Contract& c, std::vector<DLTensor>& in, std::vector<DLTensor>& out, void* stream,
               std::string* error) {
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
        call.stream = stream;
        int status = kernel_(&call);
        if (status != 0 && error) {
            const char* msg = error_fn_ ? error_fn_() : nullptr;
            *error = msg ? msg : "kernel returned status " + std::to_string(status);
        }
        return status;
    }

    // One device copy of a whole guarded buffer: [guard][data][guard].
    struct Mirror {
        void* base = nullptr;
        size_t bytes = 0;
        uint8_t* host = nullptr;
        size_t guard = 0;
    };

    int call_cuda(const Contract& c, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, std::string* error) {
        const CudaRuntime& rt = CudaRuntime::get();
        std::vector<Mirror> mirrors;
        auto release = [&] {
            for (auto& m : mirrors) rt.free(m.base);
        };
        auto mirror = [&](Tensor& t, std::vector<DLTensor>& dl) -> int {
            Mirror m;
            m.guard = t.buf->guard_size();
            m.host = t.buf->data() - m.guard;
            m.bytes = t.buf->size() + 2 * m.guard;
            if (int e = rt.malloc(&m.base, m.bytes)) return e;
            mirrors.push_back(m);
            if (int e = rt.memcpy(m.base, m.host, m.bytes, CudaRuntime::kHostToDevice)) return e;
            DLTensor d = t.dlpack();
            d.data = static_cast<uint8_t*>(m.base) + m.guard;
            d.device = {kDLCUDA, 0};
            dl.push_back(d);
            return 0;
        };
        std::vector<DLTensor> in, out;
        for (auto& t : inputs) {
            if (int e = mirror(t, in)) return release(), fail(rt, e, error);
        }
        for (auto& t : outputs) {
            if (int e = mirror(t, out)) return release(), fail(rt, e, error);
        }
        void* stream = nullptr;
        if (int e = rt.stream_create(&stream)) return release(), fail(rt, e, error);
        int status = invoke(c, in, out, stream, error);
        // A launch error or a fault inside the kernel surfaces at the synchronisation.
        const int sync = rt.stream_synchronize(stream);
        const int last = rt.get_last_error();
        rt.stream_destroy(stream);
        for (auto& m : mirrors) rt.memcpy(m.host, m.base, m.bytes, CudaRuntime::kDeviceToHost);
        release();
        if (status == 0 && (sync || last)) status = fail(rt, sync ? sync : last, error);
        return status;
    }

    static int fail(const CudaRuntime& rt, int code, std::string* error) {
        if (error) *error = "CUDA: " + rt.error(code);
        return code;
    }

    std::string path_;
    void* handle_ = nullptr;
    kcv_kernel_fn kernel_ = nullptr;
    kcv_kernel_name_fn name_fn_ = nullptr;
    kcv_kernel_last_error_fn error_fn_ = nullptr;
    kcv_kernel_resources_fn resources_fn_ = nullptr;
    bool cuda_ = false;
};

}  // namespace

std::unique_ptr<Backend> load_native(const std::string& path) {
    return std::make_unique<NativeBackend>(path);
}

}  // namespace kcv
