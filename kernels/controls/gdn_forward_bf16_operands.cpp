// Positive control for the recurrence forward contracts that allow bf16 operands
// (contracts/gdn-forward-*-bf16-operands.toml): gdn_forward.cpp with every matrix the chunked
// algorithm materialises and then multiplies stored rounded to bf16, as a kernel that keeps its
// intermediates in bf16 would (gdn/cpu/gdn_chunked.hpp, bf16_operands); products accumulate in
// float32, the gate's exponentials and the carried states stay float32. Such a contract's ORD-03
// envelope is this control's error: a float32 control would hold a bf16-operand kernel to
// float32's.
#define KCV_GDN_CONTROL_BF16_OPERANDS true
#define KCV_GDN_CONTROL_NAME "gdn_forward_bf16_operands"
#define KCV_GDN_CONTROL_TITLE "float32 chunked recurrence with bf16 operands, CPU"
#define KCV_GDN_CONTROL_OPERANDS ", every materialised operand rounded to bf16"
#define KCV_GDN_CONTROL_CONTRACTS \
    R"j("gdn-forward-linear-attention-bf16-operands", "gdn-forward-ssd-bf16-operands", "gdn-forward-gla-bf16-operands", )j" \
    R"j("gdn-forward-gdn-bf16-operands", "gdn-forward-kda-bf16-operands")j"
#include "gdn_forward.cpp"
