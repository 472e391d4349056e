// A library that does not implement the ABI: it exports no kcv_kernel.
extern "C" int not_a_kernel(void) { return 0; }
