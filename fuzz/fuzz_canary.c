/* fuzz/fuzz_canary.c — must crash on a known input ("KVCANARY" anywhere in
 * the first bytes): proves that the fuzz build, the engine and the crash
 * plumbing work. A fuzz setup that cannot find this finds nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char key[] = "KVCANARY";
    if (size >= sizeof key - 1 && memcmp(data, key, sizeof key - 1) == 0) abort();
    return 0;
}
