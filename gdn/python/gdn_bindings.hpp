// Python bindings of the float64 recurrence oracle, for kcv._core (nanobind). The module calls
// kcv::gdn::bind_oracle(m) once; python/kcv/gdn/oracle.py is the Python face of these functions.
#pragma once

#include <nanobind/nanobind.h>

namespace kcv::gdn {

// Adds gdn_oracle_forward and gdn_oracle_backward to the module:
//   gdn_oracle_forward(member, q, k, v, g, beta, h0, scale, cu_seqlens)
//       -> {"o", "ht", "o_scale", "ht_scale"}
//   gdn_oracle_backward(member, q, k, v, g, beta, h0, do, dht, scale, cu_seqlens)
//       -> {"dq", "dk", "dv", "dg", "dbeta", "dh0"} and each with "_scale" appended
// member: "linear_attention" | "ssd" | "gla" | "gdn" | "kda". Arrays are C-contiguous float64
// numpy arrays in the layout of gdn/oracle/gdn_oracle.hpp; g, beta, h0, dht and cu_seqlens
// (a list of ints) may be None. Results are new float64 numpy arrays; dg and dbeta are absent
// for members without a gate or the delta term.
void bind_oracle(nanobind::module_& m);

}  // namespace kcv::gdn
