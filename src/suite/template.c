/* template.c - what is sent to a model for a prompt (suite.h).
 *
 * One template per workload and API; the id ("math/chat/v1") is recorded
 * with the run, so a change of wording gets a new version and old runs keep
 * saying what they sent. {input} is drift_prompt.input.
 *
 *   math/completions/v1          "Question: {input}\nAnswer:"
 *   math/chat/v1                 "{input}\n\nSolve step by step and end with '#### <number>'."
 *   code/completions/v1          "{input}"  (the HumanEval prompt: the model continues the function)
 *   code/chat/v1                 "Complete the following Python function. Reply with the full
 *                                 function in a ```python block.\n\n{input}"
 *   safety/completions/v1        "User: {input}\nAssistant:"
 *   safety/chat/v1               "{input}"  (the request as it is)
 *   chat/completions/v1, chat/chat/v1   "{input}"
 *   long_context/completions/v2, long_context/chat/v2
 *       "{document}\n\nAnswer the question based on the document above, briefly.\n"
 *       "Question: {question}\nAnswer:[ {lead}]"
 *     where the input is split at its last "\n\nQuestion: " (the loaders join
 *     document and question that way; the paper's file already does) and a
 *     trailing "Answer:" of the question is dropped. A question followed by
 *     "\nAnswer: {lead}" keeps the lead, the first words of the answer
 *     (the built-in long suite's code word); v1 wrote such an input's
 *     lead into the question and added a second "Answer:", which is all that
 *     changed. An input without the marker is taken as the document followed
 *     by its own question:
 *       "{input}\n\nAnswer the question based on the document above, briefly.\nAnswer:"
 *   raw/v1 (unknown workload)    "{input}"
 *   messages/chat/v1             a prompt in chat messages form (suite.h,
 *                                DRIFT_PROMPT_MESSAGES_MARK), any workload:
 *                                the input as it is, mark and all; the HTTP
 *                                target sends its turns as "messages"
 *   messages/completions/v1      its turns as text: "System: {s}\n\n" for
 *                                system/developer turns, then "User: {u}\n"
 *                                and "Assistant: {a}\n" in order, ending
 *                                "Assistant:" (the dialogue template's form)
 * The workload's own wording is not added to a messages prompt: its turns
 * are what the user's logs sent.
 *   custom/<16 hex>              the user's template (drift_prompt_render_custom,
 *                                the request control's prompt_template): every
 *                                "{input}" replaced, for every workload and
 *                                API; the hex is the template's hash, so
 *                                another wording is another id.
 * Each workload's family of templates and its two ids are in the traits
 * table (suite/workload.h); the wording of each family is here. */
#include "driftbench/suite.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "suite/workload.h"
#include "util/util.h"

static const char LONG_INSTRUCTION[] = "\n\nAnswer the question based on the document above, briefly.\n";

static char *render_long(const char *in) {
    const char *mark = "\n\nQuestion: ";
    const char *q = NULL;
    for (const char *p = strstr(in, mark); p; p = strstr(p + 1, mark)) q = p;
    if (!q) return util_asprintf("%s%sAnswer:", in, LONG_INSTRUCTION);
    const char *qs = q + strlen(mark);
    size_t qn = strlen(qs);
    const char *lead = "";
    size_t ln = 0;
    const char *a = NULL;
    for (const char *p = strstr(qs, "\nAnswer:"); p; p = strstr(p + 1, "\nAnswer:")) a = p;
    if (a) { /* "question\nAnswer: lead" */
        qn = (size_t)(a - qs);
        lead = a + strlen("\nAnswer:");
        while (isspace((unsigned char)*lead)) lead++;
        ln = strlen(lead);
        while (ln && isspace((unsigned char)lead[ln - 1])) ln--;
    }
    while (qn && isspace((unsigned char)qs[qn - 1])) qn--;
    if (qn >= 7 && memcmp(qs + qn - 7, "Answer:", 7) == 0) {
        qn -= 7;
        while (qn && isspace((unsigned char)qs[qn - 1])) qn--;
    }
    return util_asprintf("%.*s%sQuestion: %.*s\nAnswer:%s%.*s", (int)(q - in), in, LONG_INSTRUCTION, (int)qn, qs,
                          ln ? " " : "", (int)ln, lead);
}

const char *drift_prompt_messages(const char *text) {
    size_t n = sizeof DRIFT_PROMPT_MESSAGES_MARK - 1;
    return text && strncmp(text, DRIFT_PROMPT_MESSAGES_MARK, n) == 0 ? text + n : NULL;
}

/* messages/completions/v1; NULL on nomem or a malformed array. */
static char *render_turns(const char *js) {
    json_t *a = json_loads(js, 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        return NULL;
    }
    util_buf b = {0};
    size_t i;
    json_t *m;
    int bad = 0;
    json_array_foreach(a, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *c = json_string_value(json_object_get(m, "content"));
        if (!role || !c) bad = 1;
        else if (!strcmp(role, "system") || !strcmp(role, "developer")) bad |= buf_printf(&b, "System: %s\n\n", c) < 0;
        else bad |= buf_printf(&b, "%s: %s\n", strcmp(role, "assistant") ? "User" : "Assistant", c) < 0;
    }
    json_decref(a);
    if (bad || buf_printf(&b, "Assistant:") < 0) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

char *drift_prompt_render(const drift_prompt *p, drift_api api, const char **template_id) {
    const char *in = p->input ? p->input : "";
    const char *msgs = drift_prompt_messages(in);
    if (msgs) { /* a malformed array (from a hand-edited store) falls through as plain text */
        json_t *a = json_loads(msgs, 0, NULL);
        int ok = json_is_array(a);
        json_decref(a);
        if (ok) {
            if (template_id) *template_id = api == DRIFT_API_CHAT ? "messages/chat/v1" : "messages/completions/v1";
            return api == DRIFT_API_CHAT ? util_strdup(in) : render_turns(msgs);
        }
    }
    int chat = api == DRIFT_API_CHAT;
    const wl_traits *t = wl_traits_of(p->workload);
    const char *id = t ? t->template_id[chat] : "raw/v1";
    char *out;
    switch (t ? t->template_family : WL_TEMPLATE_RAW) {
    case WL_TEMPLATE_QA:
        out = chat ? util_asprintf("%s\n\nSolve step by step and end with '#### <number>'.", in)
                   : util_asprintf("Question: %s\nAnswer:", in);
        break;
    case WL_TEMPLATE_CODE:
        out = chat ? util_asprintf("Complete the following Python function. Reply with the full function in a "
                                    "```python block.\n\n%s",
                                    in)
                   : util_strdup(in);
        break;
    case WL_TEMPLATE_DIALOGUE:
        out = chat ? util_strdup(in) : util_asprintf("User: %s\nAssistant:", in);
        break;
    case WL_TEMPLATE_LONG:
        out = render_long(in);
        break;
    default: /* WL_TEMPLATE_RAW */
        out = util_strdup(in);
        break;
    }
    if (template_id) *template_id = id;
    return out;
}

char *drift_prompt_render_custom(const drift_prompt *p, drift_api api, const char *tmpl, char *id) {
    const char *tid = NULL;
    const char *in = p->input ? p->input : "";
    if (!tmpl || !*tmpl || drift_prompt_messages(in)) {
        char *out = drift_prompt_render(p, api, &tid);
        if (id) snprintf(id, DRIFT_TEMPLATE_ID_MAX, "%s", tid ? tid : "raw/v1");
        return out;
    }
    static const char key[] = "{input}";
    util_buf b = {0};
    int bad = 0;
    const char *at = tmpl;
    for (const char *hit; !bad && (hit = strstr(at, key)); at = hit + sizeof key - 1)
        bad = buf_append(&b, at, (size_t)(hit - at)) || buf_puts(&b, in);
    if (!bad) bad = buf_puts(&b, at);
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    if (id) {
        char hex[17];
        util_hash_hex(tmpl, strlen(tmpl), hex);
        snprintf(id, DRIFT_TEMPLATE_ID_MAX, "custom/%s", hex);
    }
    return buf_steal(&b);
}
