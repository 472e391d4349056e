// CMP-02 for candidates that run inside PyTorch. Besides the CPU state the gate plans for native
// kernels (FTZ/DAZ, thread count), a PyTorch candidate inherits global state a caller may have
// set: the TF32 flags and float32 matmul precision, deterministic-algorithms mode, and on a GPU
// the current stream and CUDA graph capture. One probe per toggle; the Python executor reads the
// toggle from probe.note["torch_env"] and applies it around the candidate's call only.
#pragma once

#include <vector>

#include "kcv/contract.hpp"
#include "kcv/gate.hpp"
#include "kcv/probe.hpp"

namespace kcv::py {

// The toggles, in order: "tf32", "deterministic", and on a GPU "cuda-graph", "side-stream".
std::vector<Probe> torch_environment_probes(const Contract& c, const Settings& s, bool gpu);

}  // namespace kcv::py
