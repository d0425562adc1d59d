/* fuzz_traffic_log.c - drift_traffic_log_parse over arbitrary bytes (the
 * three log shapes). Besides "no crash, no leak": a failed parse says what
 * is wrong (non-empty message naming the log); a successful one holds the
 * loader's invariants: at least one record, non-empty unique ids, every
 * request of the log's one endpoint (chat or /v1/completions), every
 * request passes drift_traffic_request_check, is made deterministic by
 * drift_traffic_prepare (temperature 0, a seed, n 1, no stream), and judges
 * against itself as the same answer in every class; every logged response
 * reads as a message; the request's schema (if any) checks without
 * crashing. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_traffic_log *log = NULL;
    drift_error err = {0};
    drift_status rc = drift_traffic_log_parse("fuzz.jsonl", (const char *)data, size, &log, &err);
    if (rc != DRIFT_OK) {
        if (log || err.code != rc || !strstr(err.msg, "fuzz.jsonl")) abort();
        return 0;
    }
    if (!log || log->n == 0 || !log->format) abort();
    for (size_t i = 0; i < log->n; i++) {
        const drift_traffic_record *r = &log->recs[i];
        if (!r->id || !*r->id || !r->request_json || r->line == 0) abort();
        for (size_t j = i + 1; j < log->n && j < i + 64; j++)
            if (!strcmp(r->id, log->recs[j].id)) abort();
        if (drift_traffic_request_check(r->request_json, &err)) abort();
        json_t *rq = json_loads(r->request_json, 0, NULL);
        int compl = json_object_get(rq, "prompt") && !json_object_get(rq, "messages");
        json_decref(rq);
        if (compl != log->completions) abort(); /* one endpoint per log */
        char *body = NULL, *ov = NULL;
        if (drift_traffic_prepare(r->request_json, NULL, &body, &ov, &err)) abort();
        json_t *b = json_loads(body, 0, NULL);
        if (!b || json_number_value(json_object_get(b, "temperature")) != 0 || !json_object_get(b, "seed") ||
            json_is_true(json_object_get(b, "stream")))
            abort();
        const json_t *n = json_object_get(b, "n");
        if (n && json_integer_value(n) != 1) abort();
        const json_t *schema =
            json_object_get(json_object_get(json_object_get(b, "response_format"), "json_schema"), "schema");
        if (schema) {
            char *s = json_dumps(schema, JSON_COMPACT);
            char why[128];
            int v = drift_traffic_schema_check(s, "{\"a\":[1,\"x\",null]}", why, sizeof why);
            if (v < -1 || v > 1) abort();
            free(s);
        }
        json_decref(b);
        free(body);
        free(ov);
        const char *msg = "{\"content\":\"#### 42 {\\\"a\\\":1}\"}";
        drift_traffic_pair p;
        if (drift_traffic_pair_judge(r->request_json, msg, msg, &p, &err)) abort();
        for (int c = 0; c < DRIFT_TC_COUNT; c++)
            if (p.state[c] == DRIFT_TP_FLIP) abort();
        if (r->response_json) {
            char *m = NULL;
            if (drift_traffic_reply_message(r->response_json, &m, &err)) abort();
            free(m);
        }
    }
    drift_traffic_log_free(log);
    return 0;
}
