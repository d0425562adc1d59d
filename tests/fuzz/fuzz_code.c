/* fuzz_code.c - fuzz target for the code evaluator's parsers of model
 * output (src/eval/code_internal.h): the program built from an answer
 * (fence extraction, standalone vs continuation) and the runner's lines on
 * the result channel (ready / verdict with the run's nonce).
 *
 * The input is used twice: as the answer (a C string: it ends at the first
 * NUL, as the evaluator sees it) and, byte for byte with its NULs, as the
 * channel. The first byte picks the prompt and the entry point, so one seed
 * covers a completion (empty prompt, no stub) and a HumanEval stub.
 * Besides not crashing, what the header promises is checked, and abort()
 * reports a breach:
 *   build: rule "fenced" | "raw", mode "standalone" | "continuation", the
 *     program starts with the prompt, ends with a newline, holds nothing
 *     but prompt + picked code (+ at most 3 newlines), and a "raw" program
 *     holds the whole answer;
 *   verdict: found -> the kind is one of the four (or its truncation to a
 *     small cap), the nonce occurs in the channel; not found -> kind and
 *     msg empty; a cap of 0 writes nothing;
 *   ready: only when the channel starts with "ready NONCE".
 * Seeds: corpus/fuzz_code/ (fences, nested and unterminated fences, NULs,
 * a huge line, fake and near-miss verdict lines). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/code_internal.h"

#define NONCE "0123456789abcdef0123456789abcdef"
#define MAX_INPUT (1u << 20)

static const char *const prompts[] = {
    "",
    "from typing import List\n\n\ndef add(a: int, b: int) -> int:\n    \"\"\"Add two numbers.\"\"\"\n",
    "def f(x):\n    \"\"\"no trailing newline\"\"\"",
};
static const char *const entries[] = {"add", "f", "has_close_elements", "_"};

static int is_kind_prefix(const char *k) {
    static const char *const kinds[] = {"passed", "failed_test", "syntax_error", "killed"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(kinds[i], k, strlen(k)) == 0) return 1;
    return 0;
}

static void check_build(const char *answer, const char *prompt, const char *entry) {
    const char *rule = NULL, *mode = NULL;
    char *prog = code_build_program(answer, prompt, entry, &rule, &mode);
    if (!prog) abort(); /* inputs are small: out of memory is not expected */
    if (!rule || (strcmp(rule, "fenced") != 0 && strcmp(rule, "raw") != 0)) abort();
    if (!mode || (strcmp(mode, "standalone") != 0 && strcmp(mode, "continuation") != 0)) abort();
    size_t pl = strlen(prompt), al = strlen(answer), n = strlen(prog);
    if (strncmp(prog, prompt, pl) != 0) abort();
    if (n == 0 || prog[n - 1] != '\n') abort();
    if (n > pl + al + 3) abort();
    if (!strcmp(rule, "raw") && al && !strstr(prog + pl, answer)) abort();
    free(prog);
}

static void check_verdict(const uint8_t *data, size_t size, const char *nonce) {
    const char *chan = (const char *)data;
    char kind[32], msg[256];
    int found = code_parse_verdict(chan, size, nonce, kind, sizeof kind, msg, sizeof msg);
    if (found != 0 && found != 1) abort();
    if (found) {
        if (!is_kind_prefix(kind) || strlen(kind) < 6) abort();
        if (strlen(msg) >= sizeof msg) abort();
        if (!size || !memmem(chan, size, nonce, strlen(nonce))) abort();
    } else if (kind[0] || msg[0]) {
        abort();
    }
    /* small caps: truncated, terminated; a cap of 0 leaves the buffer alone */
    char k3[3], m1[1], k0[1] = {'#'}, m0[1] = {'#'};
    int f2 = code_parse_verdict(chan, size, nonce, k3, sizeof k3, m1, sizeof m1);
    if (f2 != found || strlen(k3) > 2 || m1[0] || (found && !is_kind_prefix(k3))) abort();
    int f3 = code_parse_verdict(chan, size, nonce, k0, 0, m0, 0);
    if (f3 != found || k0[0] != '#' || m0[0] != '#') abort();

    int ready = code_chan_ready(chan, size, nonce);
    size_t nl = strlen(nonce);
    if (ready && (size < 6 + nl || memcmp(chan, "ready ", 6) != 0 || memcmp(chan + 6, nonce, nl) != 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return 0;
    char *answer = malloc(size + 1);
    if (!answer) return 0;
    memcpy(answer, data, size);
    answer[size] = '\0';
    unsigned sel = size ? data[0] : 0;
    check_build(answer, prompts[sel % 3], entries[(sel / 3) % 4]);
    if (size) check_build(answer + 1, prompts[(sel + 1) % 3], "add"); /* the answer without the selector */
    free(answer);
    check_verdict(data, size, NONCE);
    check_verdict(data, size, "0123456789abcdef0123456789abcdee"); /* a near miss of the seeds' nonce */
    return 0;
}
