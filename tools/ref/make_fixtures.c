/* make_fixtures.c - writes the tiny model fixtures of tests/data/models/
 * (random weights, see tiny_model.c). Build and run from the repo root:
 *   cc -std=gnu11 -Iinclude -Isrc tools/ref/make_fixtures.c src/model/gguf.c \
 *      src/model/gguf_write.c src/util/util.c src/util/status.c \
 *      -DDRIFT_VERSION=\"0\" -lm -o /tmp/mkfix
 *   /tmp/mkfix tests/data/models */
#include <stdio.h>
#include "tiny_model.c"

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/models";
    char path[512], err[256];
    tiny_cfg q = tiny_default("qwen2");
    q.wtype = GGUF_DT_F16;
    snprintf(path, sizeof path, "%s/tiny-qwen2-f16.gguf", dir);
    if (tiny_model_write(&q, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    tiny_cfg l = tiny_default("llama");
    l.wtype = GGUF_DT_Q8_0;
    l.n_experts = 4;
    l.n_used = 2;
    l.hidden = 64;
    l.tied = 1;
    snprintf(path, sizeof path, "%s/tiny-moe-q8_0.gguf", dir);
    if (tiny_model_write(&l, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    return 0;
}
