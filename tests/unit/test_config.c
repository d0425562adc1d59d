/* test_config.c - config files (issue 37): the YAML reader (util/yaml_json.c:
 * core-schema typing, anchors, merge keys, refusals with their line, the
 * caps, alias bombs) and the config reader (src/pipeline/config.c: a
 * measure file into drift_measure_opts, a matrix file into the spec, each
 * kind of error with file:line and the key's path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/config.h"
#include "util/target_fields.h"
#include "util/yaml_json.h"

/* ---- yaml_json ---- */

static json_t *yaml_ok(const char *text, util_yaml_locator **loc) {
    json_t *root = NULL;
    drift_error err = {0};
    drift_status rc = util_yaml_parse(text, strlen(text), "t.yaml", NULL, &root, loc, &err);
    if (rc) fprintf(stderr, "unexpected error: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_non_null(root);
    return root;
}

/* The error's message for text, which must fail. */
static const char *yaml_bad(const char *text, const util_yaml_limits *lim) {
    static drift_error err;
    memset(&err, 0, sizeof err);
    json_t *root = (json_t *)1;
    util_yaml_locator *loc = (util_yaml_locator *)1;
    drift_status rc = util_yaml_parse(text, strlen(text), "t.yaml", lim, &root, &loc, &err);
    assert_int_equal(rc, DRIFT_ERR_PARSE);
    assert_null(root);
    assert_null(loc);
    return err.msg;
}

static void test_yaml_core_schema(void **state) {
    (void)state;
    json_t *r = yaml_ok("a: 1\nb: -0x1F\nc: 0o17\nd: 2.5\ne: 1e3\nf: true\ng: False\nh: null\ni: ~\nj:\n"
                        "k: yes\nl: '1'\nm: \"true\"\nn: 1_000\no: .5\np: |\n  two\n  lines\nq: !!str 12\nr: !!float 3\n"
                        "s: 08\nt: -.7E-2\n",
                        NULL);
    assert_true(json_is_integer(json_object_get(r, "a")));
    assert_int_equal(json_integer_value(json_object_get(r, "a")), 1);
    /* 0x takes no sign in the core schema: a string */
    assert_string_equal(json_string_value(json_object_get(r, "b")), "-0x1F");
    assert_int_equal(json_integer_value(json_object_get(r, "c")), 15);
    assert_true(json_is_real(json_object_get(r, "d")));
    assert_true(json_real_value(json_object_get(r, "e")) == 1000.0);
    assert_true(json_is_true(json_object_get(r, "f")));
    assert_true(json_is_false(json_object_get(r, "g")));
    assert_true(json_is_null(json_object_get(r, "h")));
    assert_true(json_is_null(json_object_get(r, "i")));
    assert_true(json_is_null(json_object_get(r, "j")));
    assert_string_equal(json_string_value(json_object_get(r, "k")), "yes"); /* 1.2: no yes/no booleans */
    assert_string_equal(json_string_value(json_object_get(r, "l")), "1");   /* quoted: a string */
    assert_string_equal(json_string_value(json_object_get(r, "m")), "true");
    assert_string_equal(json_string_value(json_object_get(r, "n")), "1_000");
    assert_true(json_real_value(json_object_get(r, "o")) == 0.5);
    assert_string_equal(json_string_value(json_object_get(r, "p")), "two\nlines\n");
    assert_string_equal(json_string_value(json_object_get(r, "q")), "12");
    assert_true(json_is_real(json_object_get(r, "r")) && json_real_value(json_object_get(r, "r")) == 3.0);
    assert_int_equal(json_integer_value(json_object_get(r, "s")), 8);
    assert_true(json_real_value(json_object_get(r, "t")) == -0.007);
    json_decref(r);
}

static void test_yaml_anchors_merge(void **state) {
    (void)state;
    util_yaml_locator *loc = NULL;
    json_t *r = yaml_ok("base: &b\n  url: http://x\n  model: m\n  headers: {A: '1'}\n"
                        "t1:\n  <<: *b\n  model: n\n"
                        "t2: {<<: [{a: 1, model: first}, {a: 2, z: 3}], own: 4}\n"
                        "list: [*b, *b]\n",
                        &loc);
    json_t *t1 = json_object_get(r, "t1");
    assert_string_equal(json_string_value(json_object_get(t1, "url")), "http://x");
    assert_string_equal(json_string_value(json_object_get(t1, "model")), "n"); /* its own key wins */
    assert_null(json_object_get(t1, "<<"));
    json_t *t2 = json_object_get(r, "t2");
    assert_int_equal(json_integer_value(json_object_get(t2, "a")), 1); /* the earlier merged mapping wins */
    assert_string_equal(json_string_value(json_object_get(t2, "model")), "first");
    assert_int_equal(json_integer_value(json_object_get(t2, "z")), 3);
    /* an alias is a copy: changing one leaves the anchor as it was */
    json_t *l0 = json_array_get(json_object_get(r, "list"), 0);
    assert_true(l0 != json_object_get(r, "base"));
    json_object_set_new(l0, "url", json_string("changed"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "base"), "url")), "http://x");
    /* places: the merged key keeps the line it was written on */
    int line = 0, col = 0;
    assert_true(util_yaml_where(loc, t1, "url", 0, &line, &col));
    assert_int_equal(line, 2);
    assert_int_equal(col, 3);
    assert_int_equal(util_yaml_path_line(loc, r, "t1.model"), 7);
    assert_int_equal(util_yaml_path_line(loc, r, "list[1]"), 9);
    assert_int_equal(util_yaml_path_line(loc, r, "t1.nothing"), 5); /* stops at t1 */
    util_yaml_locator_free(loc);
    json_decref(r);
}

static void test_yaml_refusals(void **state) {
    (void)state;
    const char *m;
    m = yaml_bad("a: 1\nb: [1, 2\nc: 3\n", NULL);
    assert_non_null(strstr(m, "t.yaml:"));
    m = yaml_bad("a: 1\nb:\n  x: 1\n  x: 2\n", NULL);
    assert_non_null(strstr(m, "t.yaml:4:3: key 'x' is given twice (first on line 3)"));
    m = yaml_bad("a: !!binary aGVsbG8=\n", NULL);
    assert_non_null(strstr(m, "t.yaml:1:4: tag"));
    m = yaml_bad("a: !!int abc\n", NULL);
    assert_non_null(strstr(m, "is not an integer"));
    m = yaml_bad("a: 99999999999999999999\n", NULL);
    assert_non_null(strstr(m, "out of range"));
    m = yaml_bad("a: .inf\n", NULL);
    assert_non_null(strstr(m, "not finite"));
    m = yaml_bad("a: 1e999\n", NULL);
    assert_non_null(strstr(m, "not finite"));
    m = yaml_bad("a: *nothing\n", NULL);
    assert_non_null(strstr(m, "names no anchor"));
    m = yaml_bad("a: &x [1, *x]\n", NULL);
    assert_non_null(strstr(m, "inside the node it names"));
    m = yaml_bad("a: 1\n---\nb: 2\n", NULL);
    assert_non_null(strstr(m, "t.yaml:2:1: a second document"));
    m = yaml_bad("? [a, b]\n: 1\n", NULL);
    assert_non_null(strstr(m, "a key must be a scalar"));
    m = yaml_bad("a: \"x\\0y\"\n", NULL);
    assert_non_null(strstr(m, "NUL"));
    m = yaml_bad("a: {<<: 3}\n", NULL);
    assert_non_null(strstr(m, "merge key"));
}

static void test_yaml_caps(void **state) {
    (void)state;
    /* a billion laughs: 9 levels of 9 aliases would be 9^9 nodes */
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                       "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                       "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    const char *m = yaml_bad(bomb, NULL);
    assert_non_null(strstr(m, "more than 100000 nodes"));
    util_yaml_limits small = {0, 5, 0};
    m = yaml_bad("[1, 2, 3, 4, 5, 6]\n", &small);
    assert_non_null(strstr(m, "more than 5 nodes"));
    char deep[400] = "";
    for (int i = 0; i < 70; i++) strcat(deep, "[");
    for (int i = 0; i < 70; i++) strcat(deep, "]");
    m = yaml_bad(deep, NULL);
    assert_non_null(strstr(m, "deeper than 64"));
    util_yaml_limits tiny = {8, 0, 0};
    m = yaml_bad("a: 123456789\n", &tiny);
    assert_non_null(strstr(m, "larger than the 8 bytes"));
    /* empty: null */
    json_t *r = yaml_ok("", NULL);
    assert_true(json_is_null(r));
    json_decref(r);
}

static void test_target_fields(void **state) {
    (void)state;
    json_t *o = json_loads("{\"url\":\"http://h:1/v1\",\"model\":\"org/M 8B&x\",\"api\":\"chat\","
                           "\"api_key_env\":\"MY_KEY\",\"detect\":false}", 0, NULL);
    char *spec = NULL, why[200];
    const char *bad = NULL;
    assert_int_equal(util_target_from_fields(o, &spec, &bad, why, sizeof why), 1);
    assert_string_equal(spec, "http://h:1/v1?model=org/M%208B%26x&api=chat&api_key_env=MY_KEY&detect=0");
    free(spec);
    json_object_set_new(o, "api_key_env", json_string("sk-abc123"));
    assert_int_equal(util_target_from_fields(o, &spec, &bad, why, sizeof why), -1);
    assert_string_equal(bad, "api_key_env");
    assert_non_null(strstr(why, "never the key itself"));
    json_object_set_new(o, "target", json_string("embedded:m.gguf"));
    assert_int_equal(util_target_from_fields(o, &spec, &bad, why, sizeof why), -1);
    json_decref(o);
}

/* ---- the measure reader ---- */

static const char MEASURE_OK[] =
    "# a comment\n"
    "store: m.db\n"
    "suites: [builtin:math, 'suite.jsonl?workload=chat']\n"
    "limit: 7\n"
    "replicates: 2\n"
    "decoding: {temperature: 0.5, top_p: 0.9, top_k: 20, seed: 7, max_tokens: 64, stop: [\"\\n\\n\", END], "
    "logprobs: 3}\n"
    "order: {by: random, seed: 9}\n"
    "system_prompt: be brief\n"
    "headers: {X-Team: drift}\n"
    "common: &common\n" /* line 10: not a key of the file: refused below; here removed */
    "targets:\n"
    "  baseline:\n"
    "    url: http://127.0.0.1:{port}/v1\n"
    "    model: meta/llama\n"
    "    api: chat\n"
    "    label: prod\n"
    "    config: {hardware: h100, framework: vllm}\n"
    "    start: vllm serve --port {port}\n"
    "    api_key_env: PROD_KEY\n"
    "  target:\n"
    "    url: https://c.example/v1\n"
    "    model: meta/llama\n"
    "    headers: {Authorization: 'env:CAND_TOKEN'}\n"
    "    extra_body: {chat_template_kwargs: {enable_thinking: false}, top_k: 1}\n"
    "    template: 'Q: {input}'\n"
    "evaluators: {guard: 'http://g/v1?model=guard', jobs: 2}\n"
    "budgets: {math: 2.5, chat: none}\n"
    "gate: {sequential: true, alpha: 0.01, decide: point, max_left_out: 10}\n"
    "compare: {sdr_threshold: 0.4}\n"
    "report: {format: markdown, output: r.md}\n"
    "servers: {health_path: /ready, start_timeout: 30}\n"
    "requests: {concurrency: 3, timeout: 60, connect_timeout: 5, retries: 2}\n";

static drift_config *parse(const char *text, int json) {
    drift_config *c = NULL;
    drift_error err = {0};
    drift_status rc = drift_config_parse(text, strlen(text), json ? "t.json" : "t.yaml", json, &c, &err);
    if (rc) fprintf(stderr, "unexpected error: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    return c;
}

static void test_measure_file(void **state) {
    (void)state;
    char *text = strdup(MEASURE_OK);
    char *common = strstr(text, "common: &common\n");
    memset(common, ' ', strlen("common: &common")); /* a blank line */
    drift_config *c = parse(text, 0);
    drift_measure_opts o;
    drift_measure_opts_default(&o);
    drift_measure_file f;
    drift_error err = {0};
    drift_status rc = drift_config_measure(c, &o, &f, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_string_equal(f.store, "m.db");
    assert_int_equal(o.n_suites, 2);
    assert_string_equal(o.suites[1], "suite.jsonl?workload=chat");
    assert_int_equal(o.limit, 7);
    assert_int_equal(o.replicates, 2);
    assert_true(o.params.temperature == 0.5 && o.params.top_p == 0.9);
    assert_int_equal(o.params.top_k, 20);
    assert_int_equal(o.params.seed, 7);
    assert_int_equal(o.params.max_tokens, 64);
    assert_int_equal(o.params.logprobs, 3);
    assert_int_equal(o.params.n_stop, 2);
    assert_string_equal(o.params.stop[0], "\n\n");
    assert_int_equal(o.order, DRIFT_ORDER_RANDOM);
    assert_int_equal(o.order_seed, 9);
    const drift_measure_side *b = &o.side[DRIFT_MEASURE_BASELINE], *t = &o.side[DRIFT_MEASURE_TARGET];
    assert_string_equal(b->target, "http://127.0.0.1:{port}/v1?model=meta/llama&api=chat&api_key_env=PROD_KEY");
    assert_string_equal(b->label, "prod");
    assert_string_equal(b->config, "hardware=h100,framework=vllm");
    assert_string_equal(b->start, "vllm serve --port {port}");
    /* the baseline has no request keys of its own: it takes target_opts.request */
    assert_null(b->request.system_prompt);
    assert_int_equal(b->request.n_headers, 0);
    assert_string_equal(o.target_opts.request.system_prompt, "be brief");
    assert_int_equal(o.target_opts.request.n_headers, 1);
    assert_string_equal(o.target_opts.request.headers[0], "X-Team: drift");
    /* the target has its own: the defaults fill the fields it lacks */
    assert_string_equal(t->target, "https://c.example/v1?model=meta/llama");
    assert_null(t->label);
    assert_string_equal(t->request.system_prompt, "be brief");
    assert_string_equal(t->request.prompt_template, "Q: {input}");
    /* headers by name: the shared X-Team kept, its own Authorization after it */
    assert_int_equal(t->request.n_headers, 2);
    assert_string_equal(t->request.headers[0], "X-Team: drift");
    assert_string_equal(t->request.headers[1], "Authorization: env:CAND_TOKEN");
    assert_string_equal(t->request.extra_body_json, "{\"chat_template_kwargs\":{\"enable_thinking\":false},\"top_k\":1}");
    assert_string_equal(o.score.guard_spec, "http://g/v1?model=guard");
    assert_int_equal(o.score.jobs, 2);
    assert_true(o.compare.budget[DRIFT_WL_MATH] == 0.025);
    assert_true(o.compare.budget[DRIFT_WL_CHAT] < 0);
    assert_true(o.compare.budget[DRIFT_WL_SAFETY] == 0.01); /* untouched: the default */
    assert_int_equal(o.sequential, 1);
    assert_true(o.alpha == 0.01);
    assert_int_equal(o.compare.rule, DRIFT_DECIDE_POINT);
    assert_true(o.compare.max_left_out == 0.1);
    assert_true(o.compare.sdr_threshold == 0.4);
    assert_int_equal(f.has_format, 1);
    assert_int_equal(f.format, DRIFT_FORMAT_MARKDOWN);
    assert_string_equal(f.output, "r.md");
    assert_string_equal(o.health_path, "/ready");
    assert_true(o.ready_timeout_s == 30);
    assert_int_equal(o.target_opts.concurrency, 3);
    assert_true(o.target_opts.read_timeout_s == 60 && o.target_opts.connect_timeout_s == 5);
    assert_int_equal(o.target_opts.max_retries, 2);
    /* a second read is refused (the tree is the options' now) */
    assert_int_equal(drift_config_measure(c, &o, &f, &err), DRIFT_ERR_INVALID);
    drift_config_free(c);
    free(text);

    /* a file that says little leaves the defaults */
    c = parse("targets: {baseline: {target: 'embedded:m.gguf'}}\n", 0);
    drift_measure_opts_default(&o);
    assert_int_equal(drift_config_measure(c, &o, &f, &err), DRIFT_OK);
    assert_string_equal(o.side[0].target, "embedded:m.gguf");
    assert_null(o.side[1].target);
    assert_int_equal(o.params.max_tokens, 512);
    assert_int_equal(o.n_suites, 0);
    assert_null(f.store);
    drift_config_free(c);
}

/* The message of measure file text, which must fail with code. */
static const char *measure_bad(const char *text, int json, drift_status code) {
    static drift_error err;
    memset(&err, 0, sizeof err);
    drift_config *c = NULL;
    drift_status rc = drift_config_parse(text, strlen(text), json ? "t.json" : "t.yaml", json, &c, &err);
    if (!rc) {
        drift_measure_opts o;
        drift_measure_opts_default(&o);
        drift_measure_file f;
        rc = drift_config_measure(c, &o, &f, &err);
        drift_config_free(c);
    }
    if (rc != code) fprintf(stderr, "got %d: %s\n", rc, err.msg);
    assert_int_equal(rc, code);
    return err.msg;
}

static void test_measure_errors(void **state) {
    (void)state;
    const char *m;
    /* unknown key, with line, path and the known ones */
    m = measure_bad("suites: [builtin:math]\ntargets:\n  baseline:\n    url: http://x/v1\n    hedaers: {A: b}\n", 0,
                    DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:5: targets.baseline.hedaers: unknown key (known: url, model"));
    m = measure_bad("suites: [builtin:math]\nlimmit: 3\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:2: limmit: unknown key (known: store, suites"));
    m = measure_bad("decoding:\n  temperature: 0\n  topp: 1\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:3: decoding.topp: unknown key"));
    /* wrong type */
    m = measure_bad("limit: ten\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:1: limit: must be an integer in [1, 100000000]"));
    m = measure_bad("suites: builtin:math\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:1: suites: must be a non-empty list of strings"));
    m = measure_bad("targets:\n  target:\n    url: http://x\n    detect: 'no'\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:4: targets.target.detect: must be true or false"));
    m = measure_bad("gate: {sequential: true}\ndecoding: {stop: [a, 3]}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:2: decoding.stop[1]: must be a non-empty string"));
    m = measure_bad("budgets: {math: 200}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "budgets.math: must be a percentage"));
    m = measure_bad("budgets: {maths: 2}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "budgets.maths: unknown workload"));
    m = measure_bad("report: {format: pdf}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:1: report.format:"));
    m = measure_bad("gate: {sequential: true}\norder: {by: suite}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "order.by: gate.sequential"));
    m = measure_bad("targets:\n  baseline:\n    url: http://x\n    template: 'no input here'\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:4: targets.baseline.template: must be a string that holds {input}"));
    m = measure_bad("targets:\n  baseline:\n    url: http://x\n    headers: {'Bad Name': x}\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "headers.Bad Name: is not a header name"));
    m = measure_bad("targets:\n  baseline:\n    url: http://x\n    extra_body: [1]\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:4: targets.baseline.extra_body: must be a mapping"));
    /* missing url */
    m = measure_bad("targets:\n  baseline:\n    model: m\n    api: chat\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:3: targets.baseline.model: needs a url (missing url)"));
    m = measure_bad("targets:\n  baseline:\n    label: x\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:2: targets.baseline: missing url"));
    /* a key, never a variable's name */
    m = measure_bad("targets:\n  baseline:\n    url: http://x\n    api_key_env: sk-live-123\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.yaml:4: targets.baseline.api_key_env: must be the NAME"));
    assert_null(strstr(m, "sk-live-123"));
    /* syntax error and duplicate key: the parser's, with line */
    m = measure_bad("suites: [builtin:math\nlimit: 3\n", 0, DRIFT_ERR_PARSE);
    assert_non_null(strstr(m, "t.yaml:"));
    m = measure_bad("limit: 3\nsuites: [a]\nlimit: 4\n", 0, DRIFT_ERR_PARSE);
    assert_non_null(strstr(m, "t.yaml:3:1: key 'limit' is given twice (first on line 1)"));
    /* the file is a mapping */
    m = measure_bad("- a\n- b\n", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "must be a mapping"));
    m = measure_bad("", 0, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "it is empty"));
    /* JSON: the same checks, no line */
    m = measure_bad("{\"targets\": {\"baseline\": {\"url\": \"http://x\", \"hedaers\": {}}}}", 1, DRIFT_ERR_INVALID);
    assert_non_null(strstr(m, "t.json: targets.baseline.hedaers: unknown key"));
    m = measure_bad("{\"limit\": 1, \"limit\": 2}", 1, DRIFT_ERR_PARSE);
    assert_non_null(strstr(m, "t.json:1:"));
}

/* ---- the matrix reader ---- */

static void test_matrix_file(void **state) {
    (void)state;
    drift_config *c = parse("name: two\n"
                            "store: m.db\n"
                            "parallel: 2\n"
                            "no_score: true\n"
                            "evaluators: {embedder: 'http://e/v1?model=e'}\n"
                            "requests: {concurrency: 5}\n"
                            "system_prompt: be brief\n"
                            "suites: [builtin:math]\n"
                            "baseline: ref\n"
                            "configs:\n"
                            "  - {label: ref, target: 'embedded:a.gguf?profile=ref', dims: {model: a}}\n"
                            "  - label: http\n"
                            "    url: http://127.0.0.1:{port}/v1\n"
                            "    model: a\n"
                            "    api: chat\n"
                            "    server: {start: 'srv --port {port}'}\n"
                            "    headers: {X-A: 'env:TOKEN'}\n"
                            "    extra_body: {top_k: 1}\n",
                            0);
    drift_matrix_spec *s = NULL;
    drift_matrix_file f;
    drift_error err = {0};
    drift_status rc = drift_config_matrix(c, &s, &f, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_string_equal(f.store, "m.db");
    assert_int_equal(f.parallel, 2);
    assert_int_equal(f.no_score, 1);
    assert_int_equal(f.concurrency, 5);
    assert_string_equal(f.score.embedder_spec, "http://e/v1?model=e");
    assert_int_equal(s->n_configs, 2);
    assert_string_equal(s->configs[1].target, "http://127.0.0.1:{port}/v1?model=a&api=chat");
    assert_non_null(s->configs[1].server.start);
    /* request control: the top level's for both, the configuration's own beside it */
    assert_string_equal(s->configs[0].system_prompt, "be brief");
    assert_int_equal(s->configs[0].n_headers, 0);
    assert_null(s->configs[0].extra_body_json);
    assert_string_equal(s->configs[1].system_prompt, "be brief");
    assert_int_equal(s->configs[1].n_headers, 1);
    assert_string_equal(s->configs[1].headers[0], "X-A: env:TOKEN");
    assert_string_equal(s->configs[1].extra_body_json, "{\"top_k\":1}");
    drift_matrix_spec_free(s);
    drift_config_free(c);

    /* errors carry the line */
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"suites: [builtin:math]\nbaseline: a\nconfigs:\n  - {label: a, target: 'embedded:x'}\n  - label: b\n"
         "    url: http://h/v1\n    apii: chat\n",
         "t.yaml:7: configs[1].apii: unknown key"},
        {"suites: [builtin:math]\nbaseline: a\nconfigs:\n  - label: a\n    model: m\n",
         "t.yaml:5: configs[0].model: needs a url"},
        {"suites: [builtin:math]\nbaseline: a\nconfigs:\n  - {label: a, target: 'embedded:x'}\nparalel: 2\n",
         "t.yaml:5: paralel: unknown key (known: name"},
        {"suites: [builtin:math]\nbaseline: zzz\nconfigs:\n  - {label: a, target: 'embedded:x'}\n",
         "t.yaml:2: baseline: 'zzz'"},
        {"suites: []\nbaseline: a\n", "t.yaml:1: suites: missing or empty"},
        {"suites: [builtin:math]\nbaseline: a\nconfigs:\n  - label: a\n    target: 'embedded:x'\n"
         "    headers: {'X Y': z}\n",
         "t.yaml:6: configs[0].headers.X Y: is not a header name"},
        {"suites: [builtin:math]\nbaseline: a\ntemplate: none\nconfigs:\n  - {label: a, target: 'embedded:x'}\n",
         "t.yaml:3: template: must be a string that holds {input}"},
        {"suites: [builtin:math]\nbaseline: a\nconfigs:\n  - {label: a, target: 'embedded:x'}\nparallel: 0\n",
         "t.yaml:5: parallel: must be an integer in [1, 256]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = parse(bad[i].text, 0);
        s = (drift_matrix_spec *)1;
        rc = drift_config_matrix(c, &s, &f, &err);
        if (!rc || !strstr(err.msg, bad[i].want)) fprintf(stderr, "case %zu: %s\n", i, err.msg);
        assert_int_not_equal(rc, DRIFT_OK);
        assert_null(s);
        assert_non_null(strstr(err.msg, bad[i].want));
        drift_config_free(c);
    }
}

/* drift_matrix_spec_load reads a .yaml spec (matrix --spec m.yaml) */
static void test_matrix_spec_load_yaml(void **state) {
    (void)state;
    char dir[] = "/tmp/test_config_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/m.yaml", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("suites: [builtin:math]\nbaseline: 'ref@{model}'\n"
          "dimensions:\n  model: {a: a.gguf, b: b.gguf}\n  precision: [f32, int4]\n"
          "target: 'embedded:{model}?weights={precision}'\nlabel: '{model}/{precision}'\n"
          "configs:\n  - {label: ref@a, target: 'embedded:a.gguf', dims: {model: a}}\n"
          "  - {label: ref@b, target: 'embedded:b.gguf', dims: {model: b}}\n",
          fp);
    fclose(fp);
    drift_matrix_spec *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_matrix_spec_load(path, &s, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(s->n_configs, 6);
    assert_string_equal(s->configs[5].target, "embedded:b.gguf?weights=int4");
    drift_matrix_spec_free(s);
    fp = fopen(path, "w");
    fputs("suites: [builtin:math]\nbaseline: a\nconfigs:\n  - {label: a, target: 'embedded:x', dims: {Bad: 1}}\n", fp);
    fclose(fp);
    assert_int_equal(drift_matrix_spec_load(path, &s, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "m.yaml:4: configs[0].dims.Bad: dimension names"));
    unlink(path);
    rmdir(dir);
}

/* the shipped examples read cleanly (docs/config.md shows them) */
static void test_examples(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    if (!src) src = DRIFT_SOURCE_DIR;
    static const char *const names[] = {"examples/serve-vs-serve.yaml", "examples/vllm-vs-sglang.yaml"};
    for (size_t i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", src, names[i]);
        drift_config *c = NULL;
        drift_error err = {0};
        drift_measure_opts o;
        drift_measure_opts_default(&o);
        drift_measure_file f;
        drift_status rc = drift_config_load(path, &c, &err);
        if (!rc) rc = drift_config_measure(c, &o, &f, &err);
        if (rc) fprintf(stderr, "%s: %s\n", names[i], err.msg);
        assert_int_equal(rc, DRIFT_OK);
        assert_non_null(o.side[0].target);
        assert_non_null(o.side[1].target);
        assert_true(o.n_suites > 0);
        if (i == 1) {
            assert_string_equal(o.side[1].target,
                                "https://sglang.internal.example/v1?model=Qwen/Qwen3-8B&api=chat&api_key_env=SGLANG_API_KEY"
                                "&detect=1");
            assert_string_equal(o.side[1].request.extra_body_json,
                                "{\"chat_template_kwargs\":{\"enable_thinking\":false},\"separate_reasoning\":false}");
            assert_string_equal(o.side[1].request.system_prompt, "You are a helpful assistant. Answer concisely.");
            assert_int_equal(o.side[1].request.n_headers, 2);
            assert_null(o.side[0].request.system_prompt); /* the baseline uses target_opts.request */
            assert_non_null(strstr(o.side[0].start, "vllm serve Qwen/Qwen3-8B --port {port}"));
            assert_int_equal(o.params.n_stop, 2);
            assert_int_equal(o.sequential, 1);
        }
        drift_config_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_core_schema), cmocka_unit_test(test_yaml_anchors_merge),
        cmocka_unit_test(test_yaml_refusals),    cmocka_unit_test(test_yaml_caps),
        cmocka_unit_test(test_target_fields),    cmocka_unit_test(test_measure_file),
        cmocka_unit_test(test_measure_errors),   cmocka_unit_test(test_matrix_file),
        cmocka_unit_test(test_matrix_spec_load_yaml), cmocka_unit_test(test_examples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
