/* code_extract.c - the code in a model's answer: the one extractor of the
 * code evaluator (code.c, through code_build_program) and of the traffic
 * layer's code drift class (src/traffic/traffic_code.c), written once so
 * that both read an answer the same way.
 *
 * A fence is "```TAG\n" ... "```"; an unclosed fence runs to the end of the
 * text. A fence counts when its tag names Python (python, py or python3,
 * in any case, blanks around it ignored) or, with DRIFT_CODE_BARE_FENCE,
 * when it has no tag: the evaluator takes an untagged block as code (the
 * answer of a code prompt is code), the traffic class does not (an untagged
 * block in free chat is as often a log or a shell line). Of the blocks that
 * count, the first that defines `def ENTRY(` wins, else the first. */
#include <string.h>
#include <strings.h>

#include "driftbench/eval.h"
#include "eval/code_internal.h"
#include "util/util.h"

/* Does [code, code+len) contain "def NAME(" at the start of a line (any
 * indentation)? */
static int defines(const char *code, size_t len, const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i + 4 + nl < len; i++) {
        if (i > 0 && code[i - 1] != '\n' && code[i - 1] != ' ' && code[i - 1] != '\t') continue;
        if (strncmp(code + i, "def ", 4) != 0) continue;
        size_t j = i + 4;
        while (j < len && code[j] == ' ') j++;
        if (j + nl >= len || strncmp(code + j, name, nl) != 0) continue;
        size_t k = j + nl;
        while (k < len && code[k] == ' ') k++;
        if (k < len && code[k] == '(') return 1;
    }
    return 0;
}

/* Does a fence's tag [tag, tag+n) make its block count (see the top)? */
static int python_tag(const char *tag, size_t n, unsigned flags) {
    while (n && (tag[n - 1] == ' ' || tag[n - 1] == '\t' || tag[n - 1] == '\r')) n--;
    while (n && (*tag == ' ' || *tag == '\t')) {
        tag++;
        n--;
    }
    if (n == 0) return (flags & DRIFT_CODE_BARE_FENCE) != 0;
    static const char *const ok[] = {"python", "py", "python3"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strlen(ok[i]) == n && strncasecmp(tag, ok[i], n) == 0) return 1;
    return 0;
}

int drift_code_extract(const char *text, const char *entry_point, unsigned flags, const char **start, size_t *len) {
    const char *first = NULL, *best = NULL;
    size_t first_len = 0, best_len = 0;
    for (const char *p = text; p && (p = strstr(p, "```")) != NULL;) {
        const char *tag = p + 3, *eol = strchr(tag, '\n');
        if (!eol) break;
        const char *body = eol + 1, *end = strstr(body, "```");
        size_t blen = end ? (size_t)(end - body) : strlen(body);
        if (python_tag(tag, (size_t)(eol - tag), flags)) {
            if (!first) {
                first = body;
                first_len = blen;
            }
            if (!best && entry_point && defines(body, blen, entry_point)) {
                best = body;
                best_len = blen;
            }
        }
        if (!end) break;
        p = end + 3;
    }
    if (!best) {
        best = first;
        best_len = first_len;
    }
    *start = best;
    *len = best ? best_len : 0;
    return best != NULL;
}

char *code_build_program(const char *answer, const char *prompt, const char *entry, const char **rule,
                         const char **mode) {
    const char *code;
    size_t clen;
    if (drift_code_extract(answer, entry, DRIFT_CODE_BARE_FENCE, &code, &clen)) {
        *rule = "fenced";
    } else {
        *rule = "raw";
        code = answer;
        clen = strlen(answer);
    }
    util_buf b = {0};
    int standalone = defines(code, clen, entry);
    *mode = standalone ? "standalone" : "continuation";
    buf_puts(&b, prompt);
    if (standalone && b.len && b.data[b.len - 1] != '\n') buf_puts(&b, "\n");
    if (standalone) buf_puts(&b, "\n");
    buf_append(&b, code, clen);
    buf_puts(&b, "\n");
    return buf_steal(&b);
}
