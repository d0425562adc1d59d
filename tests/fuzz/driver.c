/* driver.c - replay driver for fuzz targets when not built with libFuzzer.
 *
 * Each tests/fuzz/fuzz_X.c defines LLVMFuzzerTestOneInput, as libFuzzer
 * expects, so the same file builds with `clang -fsanitize=fuzzer` for real
 * coverage-guided fuzzing. For CTest this driver runs every file of the seed
 * corpus directory given as argv[1], then deterministic mutations of each
 * (bit flips, byte replacements, truncations, duplications, splices with
 * interesting bytes), DRIFT_FUZZ_ITERS per seed (default 2000). A crash or
 * sanitizer report fails the test; returning normally passes. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const uint8_t interesting[] = {0, 0xff, 0x7f, 0x80, '"', '\\', '{', '}', '[', ']', ',', ':', '\n',
                                      '\r', ' ', '0', '9', '-', 'e', 0xc3, 0xe2, 0xf0};

static void mutate(uint8_t *buf, size_t *len, size_t cap) {
    int ops = 1 + (int)(rnd() % 4);
    for (int k = 0; k < ops; k++) {
        size_t n = *len;
        switch (rnd() % 6) {
        case 0: if (n) buf[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: if (n) buf[rnd() % n] = interesting[rnd() % sizeof interesting]; break;
        case 2: if (n) *len = rnd() % n; break; /* truncate */
        case 3: /* insert a byte */
            if (n < cap) {
                size_t at = n ? rnd() % (n + 1) : 0;
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = interesting[rnd() % sizeof interesting];
                *len = n + 1;
            }
            break;
        case 4: /* duplicate a chunk */
            if (n && n < cap) {
                size_t from = rnd() % n, cnt = 1 + rnd() % (n - from);
                if (cnt > cap - n) cnt = cap - n;
                size_t at = rnd() % (n + 1);
                uint8_t *tmp = malloc(cnt);
                if (!tmp) break;
                memcpy(tmp, buf + from, cnt);
                memmove(buf + at + cnt, buf + at, n - at);
                memcpy(buf + at, tmp, cnt);
                free(tmp);
                *len = n + cnt;
            }
            break;
        case 5: /* delete a chunk */
            if (n) {
                size_t at = rnd() % n, cnt = 1 + rnd() % (n - at);
                memmove(buf + at, buf + at + cnt, n - at - cnt);
                *len = n - cnt;
            }
            break;
        }
    }
}

static int run_file(const char *path, long iters) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 0) sz = 0;
    size_t cap = (size_t)sz * 2 + 256;
    uint8_t *seed = malloc((size_t)sz + 1), *buf = malloc(cap);
    if (!seed || !buf) return fclose(f), free(seed), free(buf), 1;
    size_t got = fread(seed, 1, (size_t)sz, f);
    fclose(f);
    LLVMFuzzerTestOneInput(seed, got);
    for (long i = 0; i < iters; i++) {
        size_t len = got;
        memcpy(buf, seed, got);
        mutate(buf, &len, cap);
        /* copy into an exact-size allocation so ASan sees overreads */
        uint8_t *exact = malloc(len ? len : 1);
        if (!exact) break;
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    free(seed);
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    long iters = 2000;
    const char *e = getenv("DRIFT_FUZZ_ITERS");
    if (e) iters = atol(e);
    if (getenv("DRIFT_SANITIZED") && !e) iters = 500; /* sanitizer builds are ~10x slower */
    int files = 0;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            files += run_file(argv[a], iters);
            continue;
        }
        struct dirent *de;
        char path[4096];
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", argv[a], de->d_name);
            files += run_file(path, iters);
        }
        closedir(d);
    }
    if (files == 0) {
        fprintf(stderr, "fuzz driver: no seed files found\n");
        return 1;
    }
    printf("fuzz driver: %d seeds x %ld mutations, no crash\n", files, iters);
    return 0;
}
