/* model_text.c - text <-> tokens for a loaded model.
 *
 * Thin wrappers over the tokenizer (tokenizer.c) with the model's defaults
 * (BOS), and the built-in chat templates: model_pick_template chooses one at
 * load time from the vocabulary (ChatML, Llama-3, <|user|>..<|end|>, or
 * [INST] for SentencePiece models), and drift_model_chat_tokens renders one
 * user message through it. The template's own markers are parsed as special
 * tokens; the message never is. */
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

drift_status drift_model_chat_tokens(const drift_model *m, const char *msg, int32_t **ids, size_t *n, drift_error *err) {
    idvec o = {0};
    drift_status st;
    int bos = tok_add_bos_default(m->tok);
    switch (m->tpl) {
    case MODEL_TPL_CHATML:
        st = idvec_add_text(m, &o, "<|im_start|>user\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|im_end|>\n<|im_start|>assistant\n", 0, 1, err);
        break;
    case MODEL_TPL_LLAMA3:
        st = idvec_add_text(m, &o, "<|start_header_id|>user<|end_header_id|>\n\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0, 1, err);
        break;
    case MODEL_TPL_PHI3:
        st = idvec_add_text(m, &o, "<|user|>\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|end|>\n<|assistant|>\n", 0, 1, err);
        break;
    case MODEL_TPL_INST: {
        util_buf b = {0};
        if (buf_printf(&b, "[INST] %s [/INST]", msg)) {
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } else {
            st = idvec_add_text(m, &o, b.data, bos, 0, err);
        }
        buf_free(&b);
        break;
    }
    default:
        st = idvec_add_text(m, &o, msg, bos, 0, err);
        break;
    }
    if (st) {
        free(o.v);
        return st;
    }
    *ids = o.v ? o.v : malloc(sizeof(int32_t));
    *n = o.n;
    return DRIFT_OK;
}
