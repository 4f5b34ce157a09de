/* fuzz/cmp/wire_cmp.c — the control-message codec once more, for fuzz_wire
 * only: compiled with comparison tracing (trace-cmp), which steers
 * libFuzzer's byte mutations through the decoder's checks. The library's
 * copy (core/wire.c) is built without it: in fuzz_scenario every control
 * message goes through the codec, and there its operands come from our own
 * encoder, not from the input (tracing them cost about 7% of that target's
 * time). This object defines every symbol of core/wire.c, so the linker
 * never takes the library's. */
#include "core/wire.c"
