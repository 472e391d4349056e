// Positive control for the recurrence backward contracts that allow bf16 operands
// (contracts/gdn-backward-*-bf16-operands.toml): gdn_backward.cpp with every matrix the chunked
// algorithm materialises and then multiplies stored rounded to bf16, as a kernel that keeps its
// intermediates in bf16 would (gdn/cpu/gdn_chunked.hpp, bf16_operands); products accumulate in
// float32, the gate's exponentials and the carried states stay float32. Such a contract's ORD-03
// envelope is this control's error: a float32 control would hold a bf16-operand kernel to
// float32's.
#define KCV_GDN_CONTROL_BF16_OPERANDS true
#define KCV_GDN_CONTROL_NAME "gdn_backward_bf16_operands"
#define KCV_GDN_CONTROL_TITLE "float32 chunked recurrence adjoint with bf16 operands, CPU"
#define KCV_GDN_CONTROL_OPERANDS ", every materialised operand rounded to bf16"
#define KCV_GDN_CONTROL_CONTRACTS \
    R"j("gdn-backward-linear-attention-bf16-operands", "gdn-backward-ssd-bf16-operands", "gdn-backward-gla-bf16-operands", )j" \
    R"j("gdn-backward-gdn-bf16-operands", "gdn-backward-kda-bf16-operands")j"
#include "gdn_backward.cpp"
