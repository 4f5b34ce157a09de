/* tests/test_auth.c — the cluster secret (file, environment, keygen) and the
 * MAC every link's challenge–response uses (transport/auth/auth.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/auth/auth.h"

static char dir[64];
static char path[128];
static char err[256];

static void setup(void) {
    cr_assert_eq(kv_auth_init(), KV_OK);
    snprintf(dir, sizeof dir, "/tmp/kvauth.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/secret", dir);
    err[0] = 0;
}

static void teardown(void) {
    (void)unlink(path);
    (void)rmdir(dir);
}

static void write_file(const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(chmod(path, mode), 0);
}

TestSuite(auth, .init = setup, .fini = teardown);

Test(auth, keygen_writes_a_private_secret_that_loads_and_is_never_overwritten) {
    kv_auth_key a = {0}, b = {0};
    cr_assert_eq(kv_auth_generate(path, err, sizeof err), KV_OK, "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    cr_assert_eq(st.st_size, 65); /* 64 hex digits and a newline */
    cr_assert_eq(kv_auth_load_file(path, &a, err, sizeof err), KV_OK, "%s", err);
    cr_assert(a.set);
    cr_assert_eq(kv_auth_generate(path, err, sizeof err), KV_EEXIST);
    cr_assert(strstr(err, "never overwritten"), "%s", err);
    cr_assert_eq(kv_auth_load_file(path, &b, err, sizeof err), KV_OK);
    cr_assert_eq(memcmp(a.k, b.k, sizeof a.k), 0, "the second keygen changed the file");
    kv_auth_forget(&a);
    cr_assert(!a.set);
}

Test(auth, two_keygens_give_different_secrets) {
    kv_auth_key a = {0}, b = {0};
    cr_assert_eq(kv_auth_generate(path, err, sizeof err), KV_OK);
    cr_assert_eq(kv_auth_load_file(path, &a, err, sizeof err), KV_OK);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(kv_auth_generate(path, err, sizeof err), KV_OK);
    cr_assert_eq(kv_auth_load_file(path, &b, err, sizeof err), KV_OK);
    cr_assert_neq(memcmp(a.k, b.k, sizeof a.k), 0);
}

Test(auth, a_file_others_may_read_is_refused_and_says_how_to_fix_it) {
    kv_auth_key k = {0};
    write_file("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", 0644);
    cr_assert_eq(kv_auth_load_file(path, &k, err, sizeof err), KV_EINVAL);
    cr_assert(strstr(err, "read or written by others") && strstr(err, "chmod 600"), "%s", err);
    cr_assert(!k.set);
    cr_assert_eq(chmod(path, 0620), 0);
    cr_assert_eq(kv_auth_load_file(path, &k, err, sizeof err), KV_EINVAL, "group-writable must be refused too");
    cr_assert_eq(chmod(path, 0400), 0);
    cr_assert_eq(kv_auth_load_file(path, &k, err, sizeof err), KV_OK, "%s", err);
    cr_assert_eq(k.k[0], 0x00);
    cr_assert_eq(k.k[31], 0xff);
}

Test(auth, bad_contents_missing_files_and_directories_are_named) {
    kv_auth_key k = {0};
    static const char *const bad[] = {
        "",
        "0011",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeefg\n", /* not hex */
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff00\n", /* too long */
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n\n", /* two newlines */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(bad[i], 0600);
        err[0] = 0;
        cr_assert_eq(kv_auth_load_file(path, &k, err, sizeof err), KV_EINVAL, "case %zu", i);
        cr_assert(strstr(err, path) && strstr(err, "64 hex digits"), "case %zu: %s", i, err);
        cr_assert(!k.set);
    }
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(kv_auth_load_file(path, &k, err, sizeof err), KV_EINVAL);
    cr_assert(strstr(err, "cannot open"), "%s", err);
    cr_assert_eq(kv_auth_load_file(dir, &k, err, sizeof err), KV_EINVAL);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
}

Test(auth, the_environment_variable_holds_the_same_format) {
    kv_auth_key k = {0};
    cr_assert_eq(unsetenv("KVCONN_TEST_SECRET"), 0);
    cr_assert_eq(kv_auth_load_env("KVCONN_TEST_SECRET", &k, err, sizeof err), KV_ENOENT);
    cr_assert_eq(setenv("KVCONN_TEST_SECRET", "", 1), 0);
    cr_assert_eq(kv_auth_load_env("KVCONN_TEST_SECRET", &k, err, sizeof err), KV_ENOENT);
    cr_assert_eq(setenv("KVCONN_TEST_SECRET", "zz", 1), 0);
    cr_assert_eq(kv_auth_load_env("KVCONN_TEST_SECRET", &k, err, sizeof err), KV_EINVAL);
    cr_assert(strstr(err, "KVCONN_TEST_SECRET"), "%s", err);
    cr_assert_eq(setenv("KVCONN_TEST_SECRET", "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100", 1), 0);
    cr_assert_eq(kv_auth_load_env("KVCONN_TEST_SECRET", &k, err, sizeof err), KV_OK);
    cr_assert(k.set);
    cr_assert_eq(k.k[0], 0xff);
}

Test(auth, a_mac_depends_on_key_label_every_part_and_where_parts_split) {
    kv_auth_key k1 = {.set = true}, k2 = {.set = true};
    memset(k1.k, 1, sizeof k1.k);
    memset(k2.k, 2, sizeof k2.k);
    uint8_t m[KV_AUTH_MAC_BYTES];
    kv_auth_part ab_c[] = {{"ab", 2}, {"c", 1}}, a_bc[] = {{"a", 1}, {"bc", 2}}, ab_d[] = {{"ab", 2}, {"d", 1}};
    kv_auth_mac(&k1, "dial", ab_c, 2, m);
    cr_assert(kv_auth_check(&k1, "dial", ab_c, 2, m));
    cr_assert(!kv_auth_check(&k2, "dial", ab_c, 2, m), "another key");
    cr_assert(!kv_auth_check(&k1, "accept", ab_c, 2, m), "another label");
    cr_assert(!kv_auth_check(&k1, "dial", a_bc, 2, m), "the same bytes split elsewhere");
    cr_assert(!kv_auth_check(&k1, "dial", ab_d, 2, m), "another part");
    cr_assert(!kv_auth_check(&k1, "dial", ab_c, 1, m), "a part left out");
    m[31] ^= 1;
    cr_assert(!kv_auth_check(&k1, "dial", ab_c, 2, m), "a flipped bit");
}

Test(auth, random_bytes_differ_between_calls) {
    uint8_t a[32], b[32];
    kv_auth_random(a, sizeof a);
    kv_auth_random(b, sizeof b);
    cr_assert_neq(memcmp(a, b, sizeof a), 0);
}
