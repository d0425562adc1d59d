/* traffic.h - drift on a service's own traffic (issue 39): request logs,
 * deterministic replay of each request with its own parameters, the
 * reply in the form drift is measured on, label-free drift classes per
 * pair of answers, their paired statistics and gate, and the replay stage
 * that stores it all (driftbench replay; docs/replay.md). The pieces are
 * separate so that a shadow proxy can reuse them: parse a request
 * (drift_traffic_request_check), make it deterministic
 * (drift_traffic_prepare), send it whole (drift_target_send_raw,
 * target.h), read the reply (drift_traffic_reply_message), judge a pair
 * (drift_traffic_pair_judge) and count (drift_traffic_summarize). */
#ifndef DRIFTBENCH_TRAFFIC_H
#define DRIFTBENCH_TRAFFIC_H

#include "driftbench/alarm.h"
#include "driftbench/compare.h"
#include "driftbench/store.h"
#include "driftbench/target.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- request logs (traffic_log.c) ----
 * One JSON object per line (blank lines skipped), every line of one shape,
 * decided by the first:
 *   "chat-jsonl":       a chat/completions request body {"model":..,"messages":[..],..}
 *   "openai-batch":     the OpenAI batch API input line {"custom_id":..,"method":"POST",
 *                       "url":"/v1/chat/completions","body":{..}}
 *   "request-response": {"request":{body},"response":{reply}|null} (an "id" member is the
 *                       record's id when given)
 * A body with "prompt" and no "messages" is a /v1/completions request
 * (the prompt a string, or an array of one string); a batch line's url is
 * then /v1/completions. One log, one endpoint: chat and completions
 * requests do not mix. A completions reply's choices[0].text is its content.
 * A batch line may carry "response" too, and so may a request-response
 * line leave it out or null. A response is the reply the service served:
 * a chat.completion object (choices[0].message), or the OpenAI batch
 * output's {"status_code":200,"body":{chat.completion}}. Bodies are
 * checked as requests (drift_traffic_request_check). Errors are
 * DRIFT_ERR_PARSE "NAME:LINE: FIELD: what is wrong". Ids (custom_id, id,
 * else "line-N") must be unique. */
typedef struct drift_traffic_record {
    char *id;              /* custom_id, "id", or "line-N" */
    size_t line;           /* 1-based line of the log */
    char *request_json;    /* the body, canonical JSON (compact, sorted keys) */
    char *response_json;   /* the logged reply, canonical JSON, or NULL */
} drift_traffic_record;

typedef struct drift_traffic_log {
    char *name;            /* the path or name it was read as */
    const char *format;    /* "chat-jsonl", "openai-batch", "request-response" (static) */
    drift_traffic_record *recs;
    size_t n;
    size_t with_response;  /* records with a logged response */
    int completions;       /* the requests are /v1/completions bodies ({"prompt":..}), not chat */
} drift_traffic_log;

#define DRIFT_TRAFFIC_MAX_LINE_BYTES ((size_t)64 << 20)

DRIFT_API drift_status drift_traffic_log_load(const char *path, drift_traffic_log **out, drift_error *err);
/* The same over a buffer (len bytes; NUL bytes are an error); name is used in messages. */
DRIFT_API drift_status drift_traffic_log_parse(const char *name, const char *data, size_t len,
                                               drift_traffic_log **out, drift_error *err);
DRIFT_API void drift_traffic_log_free(drift_traffic_log *log);

/* Checks a chat/completions request body (a JSON object text): "messages"
 * a non-empty array of objects with a string "role" and a "content" that
 * is a string, an array or null (or tool_calls); "tools" (when present) an
 * array of {"type":"function","function":{"name":string,..}};
 * "response_format" (when present) an object whose "type" is text,
 * json_object or json_schema (then "json_schema":{"schema":object}).
 * DRIFT_ERR_PARSE "FIELD: what is wrong" (the caller prefixes where). */
DRIFT_API drift_status drift_traffic_request_check(const char *request_json, drift_error *err);

/* ---- deterministic replay of one request (traffic_request.c) ----
 * The request keeps every parameter of its own (messages, tools,
 * tool_choice, response_format, max_tokens, stop, logprobs, ...) except
 * where determinism needs an override:
 *   temperature -> 0 (also when absent: OpenAI's default is 1)
 *   top_p       -> 1 when present and not 1
 *   seed        -> opts.seed when absent (a seed of the request's own stays)
 *   n           -> 1 when present and not 1
 *   stream      -> false when true (stream_options dropped): a whole reply
 *   model       -> opts.model when given and different
 * Each override is recorded in *overrides_json, an object
 * {"FIELD":{"was":V|null,"now":V},...} ("{}" when none). */
#define DRIFT_TRAFFIC_OVERRIDE_RULES "deterministic-v1"
typedef struct drift_traffic_prep_opts {
    int64_t seed;          /* default 42 */
    const char *model;     /* NULL: keep the request's */
} drift_traffic_prep_opts;

DRIFT_API drift_status drift_traffic_prepare(const char *request_json, const drift_traffic_prep_opts *o, char **body,
                                             char **overrides_json, drift_error *err);

/* The answer of a reply in the form drift is measured on, stored as a
 * replay run's answer text: canonical JSON of {"content": string|null,
 * "tool_calls":[{"name":..,"arguments":..},..] (when any; arguments parsed
 * as JSON when they are JSON text, else kept as the string), "refusal":
 * string (when the reply has one)} from choices[0].message (a completions
 * reply's choices[0].text is the content). DRIFT_ERR_PARSE when the reply
 * has no such choice. */
DRIFT_API drift_status drift_traffic_reply_message(const char *reply_json, char **message_json, drift_error *err);

/* ---- JSON Schema, a subset (traffic_schema.c) ----
 * Covered: type (a name or a list of names: object, array, string, number,
 * integer, boolean, null), properties, required, additionalProperties
 * (false, or a schema), enum, const, items (one schema), minItems,
 * maxItems, minLength, maxLength, minimum, maximum, anyOf, and $ref to
 * "#/$defs/NAME" or "#/definitions/NAME". Anything else (pattern, format,
 * oneOf, allOf, ...) is ignored: the instance passes it. 1 when value
 * adheres, 0 when not (why: the first failing path and rule, in why[cap]),
 * -1 when the schema itself is malformed there. */
DRIFT_API int drift_traffic_schema_check(const char *schema_json, const char *value_json, char *why, size_t cap);

/* ---- drift classes of one pair (traffic_drift.c) ---- */
typedef enum drift_traffic_class {
    DRIFT_TC_EXACT = 0,      /* the two answers differ at all (message JSON) */
    DRIFT_TC_JSON = 1,       /* response_format json_object / json_schema: content is JSON (directional) */
    DRIFT_TC_SCHEMA = 2,     /* response_format json_schema: content adheres to the schema (directional) */
    DRIFT_TC_TOOL_NAME = 3,  /* the request has tools: the sequence of tool names called differs */
    DRIFT_TC_TOOL_ARGS = 4,  /* same names: some call's arguments differ (compared as JSON values) */
    DRIFT_TC_GUARD = 5,      /* with a guard: safe <-> unsafe (directional) */
    DRIFT_TC_MATH = 6,       /* a math-like answer: the final number differs */
    DRIFT_TC_SEMANTIC = 7,   /* with an embedder: SDR over the threshold */
    DRIFT_TC_CODE = 8,       /* a fenced Python block on either side: it compiles, or passes the tests
                              * the request carries, on one side only (directional; run in the sandbox) */
    DRIFT_TC_COUNT = 9
} drift_traffic_class;

/* "exact", "json", "schema", "tool_name", "tool_args", "guard", "math",
 * "semantic", "code"; parse gives -1 for another name. */
DRIFT_API const char *drift_traffic_class_name(drift_traffic_class c);
DRIFT_API int drift_traffic_class_parse(const char *name);

typedef enum drift_traffic_outcome {
    DRIFT_TP_NA = 0,         /* the class does not apply to this pair */
    DRIFT_TP_SAME = 1,
    DRIFT_TP_FLIP = 2,
    DRIFT_TP_ERROR = 3       /* applies but could not be judged (guard error): left out */
} drift_traffic_outcome;

typedef struct drift_traffic_pair {
    int state[DRIFT_TC_COUNT];     /* drift_traffic_outcome */
    int direction[DRIFT_TC_COUNT]; /* a FLIP of a directional class: -1 good -> bad (valid -> invalid,
                                    * safe -> unsafe), +1 bad -> good; else 0 */
    long first_diff_char;          /* where the contents first part: code points from the start; -1 same */
    long first_diff_word;          /* and in whitespace-separated words; -1 same */
    double sdr;                    /* NAN unless set */
} drift_traffic_pair;

/* Judges the classes that need no model: exact, json, schema, tool_name,
 * tool_args, math, and where the contents first part; guard, semantic and
 * code are left NA (drift_traffic_pair_set_guard / _set_sdr / _set_code). request_json: the
 * request body; base_msg / targ_msg: drift_traffic_reply_message's form.
 * Math-like: an answer from which drift_math_extract takes a number by an
 * explicit rule (strict "#### N", \boxed{N}, "the answer is N") on either
 * side; the flip is a different number, or none on one side. DRIFT_ERR_PARSE
 * when a message is not that form. */
DRIFT_API drift_status drift_traffic_pair_judge(const char *request_json, const char *base_msg, const char *targ_msg,
                                                drift_traffic_pair *out, drift_error *err);
/* Guard labels of both answers (drift_label): PASS safe, FAIL unsafe,
 * ERROR (either) left out. */
DRIFT_API void drift_traffic_pair_set_guard(drift_traffic_pair *p, int base_label, int targ_label);
/* SDR of the two contents; NAN (a zero vector) is an ERROR. */
DRIFT_API void drift_traffic_pair_set_sdr(drift_traffic_pair *p, double sdr, double threshold);

/* The code class (DRIFT_TC_CODE), judged by running code, so apart from
 * drift_traffic_pair_judge (slow: up to two sandbox runs per pair; the
 * replay stage and the stream judge call it after pair_judge, the stream
 * synchronously). It applies when either content has a fenced block tagged
 * python, py or python3 (any case; the sandbox runs Python only; an untagged
 * block is not taken for code). Each side's code is its block that defines
 * the entry point (with tests), else its first such block. The request may
 * carry tests in its "metadata" object (OpenAI's chat field; replay sends
 * the request as logged, metadata included):
 *   "driftbench_tests":       Python run against the answer: top-level
 *                             asserts calling the entry point, and/or a
 *                             HumanEval-style def check(candidate)
 *   "driftbench_entry_point": the function the tests call (an identifier)
 * With tests a side is good when its code passes them (drift_eval_code's
 * runner: the answer runs in a separate process of the sandbox and never
 * sees the tests or decides the verdict); without tests, when its code
 * compiles (Python's compile(), the code is never executed). A side with no
 * such block is bad. Identical code on both sides is SAME without a run. A
 * flip is good on one side only (direction -1 good -> bad). A sandbox that
 * fails (cannot start, no isolation, the runner never ready), tests without
 * a valid entry point, or a cancel are ERROR: left out, counted, never a
 * flip; a timeout or crash of the answer's code is the code's (bad).
 * o: the sandbox options (python, limits, cancel); NULL: drift_code_opts_default. */
struct drift_code_opts;
DRIFT_API void drift_traffic_pair_set_code(drift_traffic_pair *p, const char *request_json, const char *base_msg,
                                           const char *targ_msg, const struct drift_code_opts *o);

/* ---- paired statistics and the gate, per class ---- */
typedef struct drift_traffic_opts {
    double budget[DRIFT_TC_COUNT]; /* fraction; < 0: not gated */
    drift_decide_rule rule;        /* compare's (default INTERVAL) */
    double max_left_out;           /* default DRIFT_GATE_MAX_LEFT_OUT */
    double sdr_threshold;          /* default 0.30 */
} drift_traffic_opts;

/* Budgets: exact none (reported, not gated: any numeric change may part
 * texts), json 1%, schema 1%, tool_name 1%, tool_args 2%, guard 1%, math 2%,
 * semantic 5%, code 2%. */
DRIFT_API void drift_traffic_opts_default(drift_traffic_opts *o);
/* "json=0.5,exact=none" (percent) into o->budget; DRIFT_ERR_INVALID naming the part. */
DRIFT_API drift_status drift_traffic_parse_budgets(drift_traffic_opts *o, const char *spec, drift_error *err);

typedef struct drift_traffic_class_result {
    int present;               /* some pair to which it applies (or an error pair, see below) */
    long n;                    /* counted pairs */
    long flips;
    long worse, better;        /* directional classes: good -> bad, bad -> good */
    long left_out;             /* pairs with a request error on either side, or not judged */
    double rate, ci95[2];      /* flips / n, Wilson 95% */
    double mcnemar_p;          /* directional classes: exact McNemar of worse vs better; else NAN */
    double budget;
    drift_decision decision;   /* drift_gate_decide on (flips, n, left_out) */
    drift_decision_reason reason;
    double decide_ci[2];
    double left_out_share;
    long more_pairs;
} drift_traffic_class_result;

/* The flip taxonomy of a replay, highest risk first, as compare's: pairs
 * (answered) with a flip in each group of classes; a pair may count in
 * several groups. */
typedef struct drift_traffic_taxonomy {
    long safety, safe_to_unsafe, unsafe_to_safe; /* guard */
    long functional;           /* json, schema, tool_name, tool_args, math or code */
    long functional_worse;     /* of those, a json, schema or code flip good -> bad */
    long semantic;             /* SDR over the threshold */
    long textual_only;         /* exact flips and no other class flipped */
} drift_traffic_taxonomy;

typedef struct drift_traffic_summary {
    size_t pairs;              /* records replayed */
    size_t answered;           /* pairs with an answer on both sides */
    size_t errors_baseline, errors_target, errors_both;
    drift_traffic_class_result cls[DRIFT_TC_COUNT];
    drift_decision decision;   /* the worst present gated class's */
    drift_traffic_taxonomy taxonomy;
    double sdr_threshold;
    drift_decide_rule rule;
    double max_left_out;
} drift_traffic_summary;

/* Counts n pairs: error[i] nonzero when pair i has a request error on
 * either side (never an answer: left out of every flip, counted as left
 * out in every class that applies to its request: exact, guard and
 * semantic when enabled, math always, json/schema/tools when the request
 * asks for them, code when the request carries tests, per request_json[i]);
 * pairs[i] is ignored then.
 * guard_on / semantic_on: whether those classes were judged. */
DRIFT_API void drift_traffic_summarize(const drift_traffic_pair *pairs, const int *error,
                                       const char *const *request_json, size_t n, int guard_on, int semantic_on,
                                       const drift_traffic_opts *o, drift_traffic_summary *out);

/* ---- the replay stage (traffic_replay.c) ---- */
typedef struct drift_replay_opts {
    const char *log_path;
    const drift_traffic_log *log;  /* the log already read (the caller's; log_path unused), or NULL */
    const char *baseline_spec;     /* a target spec; NULL: the logged responses are the reference */
    const char *target_spec;
    const char *baseline_label;    /* run labels; NULL: "replay-baseline" / "replay-logged" and
                                    * "replay-target" (as measure without labels: -2, -3, ... when
                                    * one exists with another identity) */
    const char *target_label;
    drift_target_opts target_opts; /* connections, retries, keys, headers, cancel (both sides) */
    int64_t seed;                  /* the seed override (default 42) */
    const char *guard_spec;        /* NULL: no guard class; "builtin" or a guard spec (eval.h) */
    const char *embedder_spec;     /* NULL: no semantic class */
    drift_traffic_opts stats;
    drift_progress_fn progress;    /* stages "baseline", "target", "guard", "embed"; may be NULL */
    void *progress_user;
    double alpha;                  /* the stream alarms' error level per class (default 0.05) */
    const struct drift_traffic_privacy *privacy; /* what is stored (traffic_privacy.h); NULL: full texts.
                                    * Not full: requests and answers are stored redacted or hashed,
                                    * the pairs answered now are judged from memory, and pairs
                                    * stored as hashes by an earlier call are not judged again. */
    int64_t window_s;              /* drift over time: windows of this many seconds by the answers'
                                    * stored times (the later of the two), the pairs then fed to the
                                    * alarms in time order; 0 none (log order), -1 automatic (at
                                    * most 20 windows over the span) */
} drift_replay_opts;

DRIFT_API void drift_replay_opts_default(drift_replay_opts *o);

/* One pair as the report lists it. */
typedef struct drift_replay_pair {
    char *id;                      /* the record's id */
    size_t line;
    int error_baseline, error_target;
    int not_judged;                /* stored as hashes by an earlier call: not judged again */
    drift_traffic_pair p;
} drift_replay_pair;

typedef struct drift_replay_report {
    char *log_name;
    const char *log_format;
    char *baseline_label, *target_label, *baseline_target, *target_target;
    int logged;                    /* the baseline is the log's responses */
    char *guard, *embedder;        /* names, or NULL when off */
    long overrides[8];             /* requests with each override, DRIFT_TRAFFIC_OVERRIDE_FIELDS order */
    size_t asked_baseline, asked_target; /* requests sent now (the rest were stored: resumed) */
    drift_replay_pair *pairs;      /* (n_pairs,) in log order */
    size_t n_pairs;
    drift_traffic_summary sum;
    /* The stream alarm of every gated class (traffic_stream.h), fed the
     * pairs in log order: the moment the evidence was enough, or why not yet. */
    double alpha;
    int alarm_on[DRIFT_TC_COUNT];          /* the class is gated (budget >= 0) */
    drift_alarm alarm[DRIFT_TC_COUNT];     /* after the last pair */
    size_t alarm_raised_pair[DRIFT_TC_COUNT]; /* 1-based index into pairs where it was raised; 0 never */
    char *privacy;                 /* drift_traffic_privacy_describe: what the store keeps */
    size_t not_judged;             /* pairs not judged again (hashes stored earlier) */
    int64_t window_s;              /* the window size used; 0: no windows */
    struct drift_traffic_window *windows; /* (n_windows,), oldest first (traffic_stream.h) */
    size_t n_windows;
} drift_replay_report;

/* The overridable fields, in drift_replay_report.overrides order:
 * temperature, top_p, seed, n, stream, stream_options, model, and "" (unused). */
DRIFT_API extern const char *const drift_traffic_override_fields[8];

/* Replays the log against the baseline (or takes the logged responses) and
 * the target, storing prompts (each request body as the prompt's input,
 * suite "replay:" + the log's file name), one run per side (answers in
 * drift_traffic_reply_message's form; request errors as error rows), then
 * judges every pair and counts. Resumable: a second call asks only what has
 * no answer yet (errors are asked again). The run's decoding records the
 * override rules, the seed and how many requests each override touched. */
DRIFT_API drift_status drift_replay_run(drift_store *st, const drift_replay_opts *o, drift_replay_report **out,
                                        drift_error *err);
DRIFT_API void drift_replay_report_free(drift_replay_report *r);

/* Renders: text (for a terminal) or JSON (schema "driftbench.replay/1").
 * malloc'd; NULL on nomem. */
DRIFT_API char *drift_replay_render_text(const drift_replay_report *r);
DRIFT_API char *drift_replay_render_json(const drift_replay_report *r);

#ifdef __cplusplus
}
#endif
#endif
