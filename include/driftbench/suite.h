/* suite.h - prompt suites: loading files (paper jsonl, HF GSM8K, HumanEval,
 * AdvBench csv, LongBench) and built-in generators, and rendering a prompt
 * into the text sent to a model (templates per workload and API). */
#ifndef DRIFTBENCH_SUITE_H
#define DRIFTBENCH_SUITE_H

#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One prompt with its ground truth. `reference_json` is a JSON object whose
 * fields depend on the workload:
 *   math:         {"answer":"540"}                         (+ "solution")
 *   code:         {"prompt":..,"test":..,"entry_point":..}  (+ "canonical_solution")
 *   safety:       {"harmful":true|false}                   (+ "category","target")
 *   chat:         {}
 *   long_context: {"answers":["..",..]}
 * `input` is the task text as the dataset gives it (question, code prompt,
 * request; for long_context the document and question joined). */
typedef struct drift_prompt {
    char *prompt_id;        /* unique within the suite */
    drift_workload workload;
    char *input;
    char *reference_json;
    char *hash;             /* 16 hex chars over workload, input and reference */
} drift_prompt;

/* Frees what p holds and empties it (p itself stays the caller's). NULL is
 * fine. The store fills prompts the caller empties with it. */
DRIFT_API void drift_prompt_clear(drift_prompt *p);

typedef struct drift_suite {
    char *name;             /* "gsm8k_prompts", "builtin:math", ... */
    char *source;           /* path or builtin spec, as given */
    char *format;           /* detected: "paper-jsonl", "gsm8k", "humaneval", "advbench-csv", "longbench",
                             * "driftbench-jsonl", "messages-jsonl", "openai-batch", "prompt-jsonl", "builtin" */
    drift_prompt *prompts;
    size_t n;
} drift_suite;

/* Loads a suite from a file path or "builtin:NAME[?n=N&seed=S&split=test]".
 * "FILE?workload=W" gives the workload of messages, batch and prompt JSONL
 * records that carry none (the suite's source keeps the spec as given).
 * The format is detected from the fields of the first record; every record
 * is validated. A bad record fails the whole load with "FILE:LINE: ..." in
 * err (code DRIFT_ERR_PARSE). Duplicate prompt ids are an error. */
DRIFT_API drift_status drift_suite_load(const char *spec, drift_suite **out, drift_error *err);

/* Loads from a memory buffer (used by the fuzzer); `name` is used in messages. */
DRIFT_API drift_status drift_suite_parse(const char *name, const char *data, size_t len,
                                         drift_suite **out, drift_error *err);

DRIFT_API void drift_suite_free(drift_suite *suite);

/* Generates a built-in suite from "builtin:NAME[?n=N&seed=S&split=test]"
 * (src/suite/builtin.c). drift_suite_load calls it for "builtin:" specs. */
DRIFT_API drift_status drift_suite_builtin(const char *spec, drift_suite **out, drift_error *err);

/* Renders what is sent to a model for prompt p over api. Returns a malloc'd
 * string (NULL on nomem) and sets *template_id (static string, e.g.
 * "math/completions/v1") so runs can record which template they used.
 * For DRIFT_API_CHAT the result is the user message; for completions it is
 * the full prompt text. */
DRIFT_API char *drift_prompt_render(const drift_prompt *p, drift_api api, const char **template_id);

/* Longest template id drift_prompt_render_custom writes, NUL included. */
#define DRIFT_TEMPLATE_ID_MAX 64

/* drift_prompt_render with the user's template (the request control's
 * prompt_template, target.h) in place of the workload's: every "{input}"
 * of tmpl becomes the prompt's input, the rest is sent as written; its id,
 * written into id (DRIFT_TEMPLATE_ID_MAX bytes), is "custom/" and the 16
 * hex digits of tmpl's hash (util_hash_hex). A prompt in messages form is
 * rendered as drift_prompt_render does (its turns are what is sent), and
 * so is every prompt when tmpl is NULL or "" (id: the built-in's). NULL on
 * nomem. */
DRIFT_API char *drift_prompt_render_custom(const drift_prompt *p, drift_api api, const char *tmpl, char *id);

/* Prompts in chat messages form (suites in messages JSONL or OpenAI batch
 * input) hold in `input` this mark followed by the messages as canonical JSON
 * ([{"content":..,"role":..},..], compact, sorted keys), so stores keep them
 * as text and the prompt hash covers every turn. drift_prompt_render keeps
 * the mark for DRIFT_API_CHAT (the HTTP target sends the array as the
 * request's "messages"); for completions it renders the turns as
 * "System: ..\n\nUser: ..\nAssistant: ..\nUser: ..\nAssistant:". */
#define DRIFT_PROMPT_MESSAGES_MARK "\x1emessages:"

/* The messages JSON of a text (a prompt's input or a chat rendering) that
 * starts with DRIFT_PROMPT_MESSAGES_MARK; NULL for plain text. */
DRIFT_API const char *drift_prompt_messages(const char *text);

#ifdef __cplusplus
}
#endif
#endif
