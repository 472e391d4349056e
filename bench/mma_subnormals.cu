// What the tensor cores of this GPU do with subnormal numbers, one primitive at a time: the
// conversion to TF32, and mma.sync with TF32 and bf16 operands, with subnormal operands, normal
// operands whose product is subnormal, a subnormal accumulator, and subnormal products summed
// with normal ones. Each case prints the exact result (float64 on the host, rounded to float32),
// what the GPU returned, and whether the two are equal. The recurrence kernels' bf16 backward
// fails EXC-02 the way a flush to zero would; this says which primitive flushes, if any.
//
// The last cases ask how mma.sync adds the accumulator and the products: an exact sum 0.75 ulp
// past a float32 value becomes the next value when rounded to nearest and stays put when truncated
// toward zero; a product below an ulp of the largest term reaches the sum only if the alignment
// keeps bits under float32's precision; terms at k = 0 and k = 4 meet before rounding only if the
// eight products are aligned together. On an H200 (bench/RESULTS.md) every term is aligned to the
// largest and cut toward zero two bits under float32's precision, all eight products together,
// and the sum is cut toward zero: the model of gdn/cuda/host_emulation.hpp. The same question for
// bf16's sixteen products (k = 0 and 8, 7 and 15): on an H200 they too are aligned as one group.
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a bench/mma_subnormals.cu -o mma_subnormals
//   ./mma_subnormals
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

#define CHECK(x)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            std::exit(1);                                                                   \
        }                                                                                   \
    } while (0)

__device__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// A thread's four elements of a 16×8 accumulator tile (the m16n8 D/C fragment layout), with
// g = lane / 4 and t = lane % 4: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
__device__ int acc_index(int g, int t, int r) { return (g + (r >> 1) * 8) * 8 + 2 * t + (r & 1); }

__device__ void load_acc(const float* c, int g, int t, float (&d)[4]) {
    for (int r = 0; r < 4; ++r) d[r] = c[acc_index(g, t, r)];
}

__device__ void store_acc(float* out, int g, int t, const float (&d)[4]) {
    for (int r = 0; r < 4; ++r) out[acc_index(g, t, r)] = d[r];
}

// D (16×8) = A (16×8, row-major) · B (8×8, column k-major: B[k*8+n]) + C, mma.sync.m16n8k8 TF32.
// convert: pass the operands through cvt.rna.tf32.f32 (as the kernels do) or as raw float bits.
__global__ void mma_tf32(const float* a, const float* b, const float* c, float* d, bool convert) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    auto op = [&](float x) { return convert ? to_tf32(x) : __float_as_uint(x); };
    const uint32_t a0 = op(a[g * 8 + t]), a1 = op(a[(g + 8) * 8 + t]), a2 = op(a[g * 8 + t + 4]),
                   a3 = op(a[(g + 8) * 8 + t + 4]);
    const uint32_t b0 = op(b[t * 8 + g]), b1 = op(b[(t + 4) * 8 + g]);
    float acc[4];
    load_acc(c, g, t, acc);
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    store_acc(d, g, t, acc);
}

__device__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// D (16×8) = A (16×16, row-major) · B (16×8, B[k*8+n]) + C, mma.sync.m16n8k16 bf16.
__global__ void mma_bf16(const float* a, const float* b, const float* c, float* d) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    auto A = [&](int m, int k) { return a[m * 16 + k]; };
    auto B = [&](int k, int n) { return b[k * 8 + n]; };
    const uint32_t a0 = pack(A(g, 2 * t), A(g, 2 * t + 1)), a1 = pack(A(g + 8, 2 * t), A(g + 8, 2 * t + 1)),
                   a2 = pack(A(g, 2 * t + 8), A(g, 2 * t + 9)), a3 = pack(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9));
    const uint32_t b0 = pack(B(2 * t, g), B(2 * t + 1, g)), b1 = pack(B(2 * t + 8, g), B(2 * t + 9, g));
    float acc[4];
    load_acc(c, g, t, acc);
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    store_acc(d, g, t, acc);
}

__global__ void convert_tf32(const float* x, uint32_t* y, int n) {
    const int i = threadIdx.x;
    if (i < n) y[i] = to_tf32(x[i]);
}

// Ordinary float32 arithmetic of the kernels' SIMT code, on subnormal operands and results.
__global__ void simt(const float* x, float* y) {
    y[0] = x[0] * x[1];          // normal × normal → subnormal
    y[1] = x[2] + x[3];          // subnormal + subnormal
    y[2] = x[2] * x[4];          // subnormal × normal
    y[3] = __fmaf_rn(x[0], x[1], x[2]);
    y[4] = x[2] / x[4];          // subnormal ÷ normal
    y[5] = float(double(x[2]) * 0.5);
}

struct Case {
    const char* name;
    int kind;   // 0: TF32 raw bits, 1: TF32 through cvt, 2: bf16
    std::vector<float> a, b, c;   // row 0 of A, column 0 of B (broadcast to every column), C[0][0]
};

float p2(int e) { return std::ldexp(1.0f, e); }

bool same(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

int run_case(const Case& cs) {
    const int K = cs.kind == 2 ? 16 : 8;
    std::vector<float> a(16 * K, 0.0f), b(K * 8, 0.0f), c(16 * 8, 0.0f), d(16 * 8, 0.0f);
    for (size_t k = 0; k < cs.a.size(); ++k) a[k] = cs.a[k];
    for (size_t k = 0; k < cs.b.size(); ++k)
        for (int n = 0; n < 8; ++n) b[k * 8 + n] = cs.b[k];
    if (!cs.c.empty()) c[0] = cs.c[0];
    float *da, *db, *dc, *dd;
    CHECK(cudaMalloc(&da, a.size() * 4));
    CHECK(cudaMalloc(&db, b.size() * 4));
    CHECK(cudaMalloc(&dc, c.size() * 4));
    CHECK(cudaMalloc(&dd, d.size() * 4));
    CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
    if (cs.kind == 2)
        mma_bf16<<<1, 32>>>(da, db, dc, dd);
    else
        mma_tf32<<<1, 32>>>(da, db, dc, dd, cs.kind == 1);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    double exact = cs.c.empty() ? 0.0 : cs.c[0];
    for (size_t k = 0; k < cs.a.size() && k < cs.b.size(); ++k) exact += double(cs.a[k]) * double(cs.b[k]);
    const float want = static_cast<float>(exact);
    const bool ok = same(want, d[0]);
    std::printf("%-58s %-6s want %-14.8g got %-14.8g %s\n", cs.name,
                cs.kind == 0 ? "tf32" : cs.kind == 1 ? "tf32c" : "bf16", want, d[0], ok ? "equal" : "DIFFERENT");
    return ok ? 0 : 1;
}

}  // namespace

int main() {
    int differ = 0;
    {
        const std::vector<float> x = {p2(-127), p2(-130), 3 * p2(-148), p2(-149), p2(-126), 1.0f + p2(-20)};
        float* dx;
        uint32_t* dy;
        CHECK(cudaMalloc(&dx, x.size() * 4));
        CHECK(cudaMalloc(&dy, x.size() * 4));
        CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
        convert_tf32<<<1, 32>>>(dx, dy, static_cast<int>(x.size()));
        std::vector<uint32_t> y(x.size());
        CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < x.size(); ++i) {
            uint32_t xb;
            std::memcpy(&xb, &x[i], 4);
            float yf;
            std::memcpy(&yf, &y[i], 4);
            std::printf("cvt.rna.tf32.f32 %-14.8g bits %08x -> %08x (%g)%s\n", x[i], xb, y[i], yf,
                        (y[i] == 0 && x[i] != 0) ? "  FLUSHED" : "");
            differ += y[i] == 0 && x[i] != 0;
        }
        cudaFree(dx);
        cudaFree(dy);
    }
    {
        const std::vector<float> x = {p2(-70), p2(-70), p2(-140), p2(-141), 0.75f};
        float *dx, *dy;
        CHECK(cudaMalloc(&dx, 8 * 4));
        CHECK(cudaMalloc(&dy, 8 * 4));
        CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
        simt<<<1, 1>>>(dx, dy);
        float y[6];
        CHECK(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost));
        const float want[6] = {p2(-140), p2(-140) + p2(-141), float(double(p2(-140)) * 0.75),
                               float(double(p2(-140)) + double(p2(-140))), float(double(p2(-140)) / 0.75),
                               p2(-141)};
        const char* names[6] = {"simt 2^-70 * 2^-70", "simt 2^-140 + 2^-141", "simt 2^-140 * 0.75",
                                "simt fma(2^-70, 2^-70, 2^-140)", "simt 2^-140 / 0.75", "simt float(double * 0.5)"};
        for (int i = 0; i < 6; ++i) {
            const bool ok = same(want[i], y[i]);
            std::printf("%-58s %-6s want %-14.8g got %-14.8g %s\n", names[i], "f32", want[i], y[i],
                        ok ? "equal" : "DIFFERENT");
            differ += !ok;
        }
        cudaFree(dx);
        cudaFree(dy);
    }
    const std::vector<Case> cases = {
        {"subnormal operand: 2^-140 * 1", 0, {p2(-140)}, {1.0f}, {}},
        {"subnormal operand: 2^-140 * 1", 1, {p2(-140)}, {1.0f}, {}},
        {"subnormal operand: 3*2^-148 * 0.75", 1, {3 * p2(-148)}, {0.75f}, {}},
        {"normal operands, subnormal product: 2^-70 * 2^-70", 1, {p2(-70)}, {p2(-70)}, {}},
        {"normal operands, subnormal product: 2^-63 * 2^-64", 1, {p2(-63)}, {p2(-64)}, {}},
        {"subnormal accumulator: C = 2^-140, A = B = 0", 1, {}, {}, {p2(-140)}},
        {"subnormal accumulator plus subnormal product", 1, {p2(-140)}, {1.0f}, {p2(-140)}},
        {"eight subnormal products summing to a normal: 8 * 2^-127", 1,
         std::vector<float>(8, p2(-127)), std::vector<float>(8, 1.0f), {}},
        {"normal plus subnormal product: 2^-120 + 2^-140", 1, {p2(-120), p2(-140)}, {1.0f, 1.0f}, {}},
        {"normal accumulator plus subnormal product", 1, {p2(-140)}, {1.0f}, {p2(-120)}},
        {"subnormal operand: 2^-130 * 1", 2, {p2(-130)}, {1.0f}, {}},
        {"normal operands, subnormal product: 2^-70 * 2^-70", 2, {p2(-70)}, {p2(-70)}, {}},
        {"subnormal accumulator: C = 2^-140, A = B = 0", 2, {}, {}, {p2(-140)}},
        {"sixteen subnormal products summing to a normal: 16 * 2^-127", 2,
         std::vector<float>(16, p2(-127)), std::vector<float>(16, 1.0f), {}},
        {"normal plus subnormal product: 2^-120 + 2^-130", 2, {p2(-120), p2(-130)}, {1.0f, 1.0f}, {}},
        {"normal accumulator plus subnormal product", 2, {p2(-130)}, {1.0f}, {p2(-120)}},
        {"rounding: 1 + 0.75 ulp(1) (nearest: 1 + 2^-23; toward zero: 1)", 1, {0.75f}, {p2(-23)}, {1.0f}},
        {"rounding: -1 - 0.75 ulp(1)", 1, {-0.75f}, {p2(-23)}, {-1.0f}},
        {"rounding: 1 + 0.25 ulp(1) (nearest and toward zero: 1)", 1, {0.25f}, {p2(-23)}, {1.0f}},
        {"rounding: 1 + 8 products of 2^-26 (exact: 1 + 2^-23)", 1, std::vector<float>(8, p2(-26)),
         std::vector<float>(8, 1.0f), {1.0f}},
        {"rounding: 1 - 2^-25 (nearest: 1; toward zero: 1 - 2^-24)", 1, {-1.0f}, {p2(-25)}, {1.0f}},
        {"rounding: products only, 1 + 3 * 2^-25 (nearest: 1 + 2^-23)", 1, {1.0f, 0.75f}, {1.0f, p2(-23)}, {}},
        {"rounding: bf16, 1 + 0.75 ulp(1)", 2, {0.75f}, {p2(-23)}, {1.0f}},
        // How many bits under float32's precision an aligned term keeps, whether the eight products
        // are aligned together, and which way a negative term is cut (host_emulation.hpp's model:
        // two bits, together, toward zero, gives 1 + 2^-23, 1 + 2^-23, 1, 1).
        {"align: 1 + 4 products of 2^-25 (2 bits kept: 1 + 2^-23)", 1, std::vector<float>(4, p2(-25)),
         std::vector<float>(4, 1.0f), {1.0f}},
        {"align: 1 + 2^-24 at k = 0 and k = 4 (one group: 1 + 2^-23)", 1, {p2(-24), 0.0f, 0.0f, 0.0f, p2(-24)},
         std::vector<float>(5, 1.0f), {1.0f}},
        {"align: 1 + 2^-26 + 2^-26 + 2^-25 + 2^-24 (3 bits kept: 1 + 2^-23)", 1,
         {p2(-26), p2(-26), p2(-25), p2(-24)}, std::vector<float>(4, 1.0f), {1.0f}},
        {"align: 1 - 2^-26 (2 bits, toward zero: 1; toward -inf or 3 bits: 1 - 2^-24)", 1, {-p2(-26)}, {1.0f},
         {1.0f}},
        // Whether a bf16 tile's sixteen products are aligned as one group (1 + 2^-23) or as two groups
        // of eight, each cut to float32 before the next is added (1).
        {"align: bf16, 1 + 2^-24 at k = 0 and k = 4 (one group: 1 + 2^-23)", 2,
         {p2(-24), 0.0f, 0.0f, 0.0f, p2(-24)}, std::vector<float>(5, 1.0f), {1.0f}},
        {"align: bf16, 1 + 2^-24 at k = 0 and k = 8 (one group: 1 + 2^-23; two: 1)", 2,
         {p2(-24), 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, p2(-24)}, std::vector<float>(9, 1.0f), {1.0f}},
        {"align: bf16, 1 + 2^-24 at k = 7 and k = 15 (one group: 1 + 2^-23; two: 1)", 2,
         {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, p2(-24), 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, p2(-24)},
         std::vector<float>(16, 1.0f), {1.0f}},
    };
    for (const Case& cs : cases) differ += run_case(cs);
    std::printf("%d of %zu checks differ from the exact result\n", differ, cases.size() + 12);
    return 0;
}
