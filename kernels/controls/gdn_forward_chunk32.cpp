// The chunked algorithm of gdn_forward.cpp with chunks of 32 tokens instead of 64: another correct
// float32 implementation of the recurrence contracts (contracts/gdn-forward-*.toml), which rounds
// differently. Not among the contracts' controls: `bench/ord03_sweep.py --candidates chunk32` (or
// chunk128) judges it against the chunked and the token-by-token controls, and the spread of
// correct implementations it measures is what a contract's ORD-03 margin is read from
// (docs/gates.md, "A contract's own margin"). Its manifest's role is "variant", so that `kcv
// redteam` and `kcv demo` do not run it as a positive control: chunks of 128 fail EXC-02 on KDA's
// dh0 at seed 0 (r = 1.018), beyond the analytic bound's allowance for gradual underflow
// (bench/RESULTS.md, "ORD-03 and the chunk length").
#define KCV_GDN_CONTROL_BF16_OPERANDS false
#define KCV_GDN_CONTROL_ROLE "variant"
#define KCV_GDN_CONTROL_CHUNK 32
#define KCV_GDN_CONTROL_NAME "gdn_forward_chunk32"
#define KCV_GDN_CONTROL_TITLE "float32 chunked recurrence, chunks of 32 tokens, CPU"
#define KCV_GDN_CONTROL_OPERANDS ""
#define KCV_GDN_CONTROL_CONTRACTS \
    R"j("gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla", "gdn-forward-gdn", "gdn-forward-kda")j"
#include "gdn_forward.cpp"
