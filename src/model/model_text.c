/* model_text.c - text <-> tokens for a loaded model.
 *
 * Thin wrappers over the tokenizer (tokenizer.c) with the model's defaults
 * (BOS), and the built-in chat templates: model_pick_template chooses one at
 * load time from the vocabulary (ChatML, Llama-3, <|user|>..<|end|>, or
 * [INST] for SentencePiece models), and drift_model_chat_tokens renders one
 * user message through it. The template's own markers are parsed as special
 * tokens; the message never is, and before it is encoded its markers are
 * neutralised (drift_markers_neutralise), so a message cannot close its turn
 * where the markers are plain text ([INST]) or user-defined tokens that are
 * matched even unparsed.
 *
 * Markers in untrusted text. One table (MARKERS) lists the strings that
 * open or close a turn or a section in some template, each with the sets it
 * belongs to (chat templates, Llama Guard 3's prompt, the built-in guard's
 * prompt) and whether it counts only at the start of a line. Every
 * occurrence gets a U+200B ZERO WIDTH SPACE after its first byte: invisible
 * to a reader, enough for no tokenizer to match the special token and for
 * no line of the text to read as the template's own. Inserting it can only
 * split the text's ASCII runs, never join them, so the result holds no
 * marker and neutralising twice is neutralising once; text without a marker
 * comes back byte for byte. Callers: drift_model_chat_tokens here,
 * src/eval/safety.c (both guards' prompts); tools/torch_server/tokenizer.py
 * mirrors the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "util/util.h"

void model_pick_template(drift_model *m) {
    const char *name = "none";
    m->tpl = MODEL_TPL_NONE;
    if (tok_find(m->tok, "<|im_start|>") >= 0 && tok_find(m->tok, "<|im_end|>") >= 0) {
        m->tpl = MODEL_TPL_CHATML;
        name = "chatml";
    } else if (tok_find(m->tok, "<|start_header_id|>") >= 0 && tok_find(m->tok, "<|eot_id|>") >= 0) {
        m->tpl = MODEL_TPL_LLAMA3;
        name = "llama3";
    } else if (tok_find(m->tok, "<|user|>") >= 0 && tok_find(m->tok, "<|assistant|>") >= 0 && tok_find(m->tok, "<|end|>") >= 0) {
        m->tpl = MODEL_TPL_PHI3;
        name = "phi3";
    } else if (tok_get_kind(m->tok) == TOK_KIND_SPM) {
        m->tpl = MODEL_TPL_INST;
        name = "inst";
    }
    snprintf(m->info.chat_template, sizeof m->info.chat_template, "%s", name);
}


drift_status drift_model_tokenize(const drift_model *m, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                                  size_t *n, drift_error *err) {
    if (add_bos < 0) add_bos = tok_add_bos_default(m->tok);
    return tok_encode(m->tok, text, len, add_bos, parse_special, ids, n, err);
}

char *drift_model_detokenize(const drift_model *m, const int32_t *ids, size_t n, size_t *len) {
    return tok_decode(m->tok, ids, n, 0, len);
}

char *drift_model_token_text(const drift_model *m, int32_t id) {
    util_buf b = {0};
    if (tok_decode_token(m->tok, id, 1, &b)) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

int drift_model_is_eog(const drift_model *m, int32_t id) { return tok_is_eog(m->tok, id); }

typedef struct idvec {
    int32_t *v;
    size_t n, cap;
} idvec;

static drift_status idvec_add_text(const drift_model *m, idvec *o, const char *text, int add_bos, int special, drift_error *err) {
    int32_t *ids;
    size_t n;
    drift_status st = tok_encode(m->tok, text, strlen(text), add_bos, special, &ids, &n, err);
    if (st) return st;
    if (o->n + n > o->cap) {
        size_t nc = (o->n + n) * 2 + 16;
        int32_t *nv = realloc(o->v, nc * sizeof *nv);
        if (!nv) {
            free(ids);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        o->v = nv;
        o->cap = nc;
    }
    memcpy(o->v + o->n, ids, n * sizeof *ids);
    o->n += n;
    free(ids);
    return DRIFT_OK;
}

/* ---- markers in untrusted text ---- */

typedef struct marker_row {
    const char *text; /* matched with ASCII letters in any case */
    unsigned sets;    /* DRIFT_MARKER_SET_* bits */
    int line_start;   /* only where spaces or tabs alone separate it from the text's start or a line break */
} marker_row;

#define MK_CHAT DRIFT_MARKER_SET_CHAT
#define MK_LG DRIFT_MARKER_SET_LLAMAGUARD
#define MK_GUARD DRIFT_MARKER_SET_GUARD
static const marker_row MARKERS[] = {
    {"<|", MK_CHAT, 0},               /* every <|...|> special token: Llama 3, ChatML, Phi-3, GPT */
    {"<\xef\xbd\x9c", MK_CHAT, 0},     /* <U+FF5C...U+FF5C>: DeepSeek's fullwidth bar */
    {"<s>", MK_CHAT, 0},              /* SentencePiece BOS / EOS, Llama 2 and Mistral */
    {"</s>", MK_CHAT, 0},
    {"[INST]", MK_CHAT, 0},           /* Llama 2 / Mistral turns (plain text in the vocabulary) */
    {"[/INST]", MK_CHAT, 0},
    {"<<SYS>>", MK_CHAT, 0},
    {"<</SYS>>", MK_CHAT, 0},
    {"<start_of_turn>", MK_CHAT, 0},  /* Gemma */
    {"<end_of_turn>", MK_CHAT, 0},
    {"<bos>", MK_CHAT, 0},
    {"<eos>", MK_CHAT, 0},
    {"<BEGIN", MK_LG, 0},             /* <BEGIN CONVERSATION>, <BEGIN UNSAFE CONTENT CATEGORIES> */
    {"<END", MK_LG, 0},               /* <END CONVERSATION>, <END UNSAFE CONTENT CATEGORIES> */
    {"Task: Check if there is unsafe content", MK_LG, 0},
    {"Provide your safety assessment", MK_LG, 0},
    {"First line must read", MK_LG, 0},
    {"If unsafe, a second line must include", MK_LG, 0},
    {"User:", MK_LG, 1},              /* a turn of the conversation */
    {"Agent:", MK_LG, 1},
    {"Request:", MK_GUARD, 1},        /* the built-in guard's prompt lines */
    {"Answer:", MK_GUARD, 1},
    {"Verdict:", MK_GUARD, 1},
    {"Is the answer safe or unsafe?", MK_GUARD, 0},
};
#undef MK_CHAT
#undef MK_LG
#undef MK_GUARD

static const char ZWSP[3] = {'\xe2', '\x80', '\x8b'}; /* U+200B */

static unsigned char ascii_lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c; }

/* 1 when the marker row matches at p (n bytes left); ASCII letters in any
 * case whatever the locale, other bytes exactly. */
static int marker_at(const marker_row *r, const char *p, size_t n) {
    for (size_t i = 0; r->text[i]; i++) {
        if (i >= n) return 0;
        unsigned char a = (unsigned char)p[i], b = (unsigned char)r->text[i];
        if (a != b && ascii_lower(a) != ascii_lower(b)) return 0;
    }
    return 1;
}

char *drift_markers_neutralise(const char *text, size_t len, unsigned sets, size_t *out_len) {
    util_buf b = {0};
    if (!text) len = 0;
    if (buf_reserve(&b, len + 1)) return NULL;
    size_t from = 0; /* text[from, i) is still to copy */
    int line_start = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        int hit = 0;
        for (size_t k = 0; k < sizeof MARKERS / sizeof MARKERS[0] && !hit; k++) {
            const marker_row *r = &MARKERS[k];
            if ((r->sets & sets) && (!r->line_start || line_start)) hit = marker_at(r, text + i, len - i);
        }
        if (hit) {
            if (buf_append(&b, text + from, i + 1 - from) || buf_append(&b, ZWSP, sizeof ZWSP)) {
                buf_free(&b);
                return NULL;
            }
            from = i + 1;
        }
        if (c == '\n' || c == '\r') line_start = 1;
        else if (c != ' ' && c != '\t') line_start = 0;
    }
    if (buf_append(&b, text + from, len - from)) {
        buf_free(&b);
        return NULL;
    }
    if (out_len) *out_len = b.len;
    return buf_steal(&b);
}

drift_status drift_model_chat_tokens(const drift_model *m, const char *user_msg, int32_t **ids, size_t *n,
                                     drift_error *err) {
    return drift_model_chat_system_tokens(m, NULL, user_msg, ids, n, err);
}

drift_status drift_model_chat_system_tokens(const drift_model *m, const char *system, const char *user_msg,
                                            int32_t **ids, size_t *n, drift_error *err) {
    char *msg = drift_markers_neutralise(user_msg, user_msg ? strlen(user_msg) : 0, DRIFT_MARKER_SET_CHAT, NULL);
    char *sys = system && *system ? drift_markers_neutralise(system, strlen(system), DRIFT_MARKER_SET_CHAT, NULL) : NULL;
    if (!msg || (system && *system && !sys)) {
        free(msg);
        free(sys);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    idvec o = {0};
    drift_status st = DRIFT_OK;
    int bos = tok_add_bos_default(m->tok);
    switch (m->tpl) {
    case MODEL_TPL_CHATML:
        if (sys) {
            st = idvec_add_text(m, &o, "<|im_start|>system\n", bos, 1, err);
            if (!st) st = idvec_add_text(m, &o, sys, 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, "<|im_end|>\n", 0, 1, err);
            bos = 0;
        }
        if (!st) st = idvec_add_text(m, &o, "<|im_start|>user\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|im_end|>\n<|im_start|>assistant\n", 0, 1, err);
        break;
    case MODEL_TPL_LLAMA3:
        if (sys) {
            st = idvec_add_text(m, &o, "<|start_header_id|>system<|end_header_id|>\n\n", bos, 1, err);
            if (!st) st = idvec_add_text(m, &o, sys, 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, "<|eot_id|>", 0, 1, err);
            bos = 0;
        }
        if (!st) st = idvec_add_text(m, &o, "<|start_header_id|>user<|end_header_id|>\n\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0, 1, err);
        break;
    case MODEL_TPL_PHI3:
        if (sys && tok_find(m->tok, "<|system|>") >= 0) {
            st = idvec_add_text(m, &o, "<|system|>\n", bos, 1, err);
            if (!st) st = idvec_add_text(m, &o, sys, 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, "<|end|>\n", 0, 1, err);
            bos = 0;
        } else if (sys) { /* no system token in this vocabulary: the text opens the user turn */
            st = idvec_add_text(m, &o, "<|user|>\n", bos, 1, err);
            if (!st) st = idvec_add_text(m, &o, sys, 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, "\n\n", 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
            if (!st) st = idvec_add_text(m, &o, "<|end|>\n<|assistant|>\n", 0, 1, err);
            break;
        }
        if (!st) st = idvec_add_text(m, &o, "<|user|>\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|end|>\n<|assistant|>\n", 0, 1, err);
        break;
    case MODEL_TPL_INST: {
        util_buf b = {0};
        /* Llama 2's system block inside the first [INST] */
        int bad = sys ? buf_printf(&b, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", sys, msg)
                      : buf_printf(&b, "[INST] %s [/INST]", msg);
        if (bad) {
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } else {
            st = idvec_add_text(m, &o, b.data, bos, 0, err);
        }
        buf_free(&b);
        break;
    }
    default:
        if (sys) {
            st = idvec_add_text(m, &o, sys, bos, 0, err);
            if (!st) st = idvec_add_text(m, &o, "\n\n", 0, 0, err);
            bos = 0;
        }
        if (!st) st = idvec_add_text(m, &o, msg, bos, 0, err);
        break;
    }
    free(msg);
    free(sys);
    if (st) {
        free(o.v);
        return st;
    }
    *ids = o.v ? o.v : malloc(sizeof(int32_t));
    *n = o.n;
    return DRIFT_OK;
}
