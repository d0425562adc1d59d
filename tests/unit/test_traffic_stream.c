/* test_traffic_stream.c - the streaming judge (traffic_stream.h): the alarm
 * raised on a drifting stream at the pair its event names and silent on an
 * identical one, counts that agree with drift_traffic_summarize over the
 * same pairs (errors and math's rule included), windows by time, the
 * metrics families, and exact resume (a snapshot restored and fed the rest
 * gives the JSON of a stream fed everything), with the snapshot's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic_stream.h"

static const char *REQ_JSON = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                              "\"response_format\":{\"type\":\"json_object\"}}";
static const char *REQ_PLAIN = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
static const char *MSG_OBJ = "{\"content\":\"{\\\"a\\\": 1}\"}";
static const char *MSG_OBJ2 = "{\"content\":\"{\\\"a\\\": 2}\"}";
static const char *MSG_BAD = "{\"content\":\"{\\\"a\\\": \"}";
static const char *MSG_MATH1 = "{\"content\":\"so the answer is 12\"}";
static const char *MSG_MATH2 = "{\"content\":\"so the answer is 13\"}";

static uint64_t rng = 88172645463325252ULL;
static double uni(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static drift_traffic_stream *new_stream(double alpha) {
    drift_traffic_opts o;
    drift_traffic_opts_default(&o);
    drift_traffic_stream *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_stream_new(&o, alpha, NULL, NULL, &s, &err), DRIFT_OK);
    return s;
}

static void add(drift_traffic_stream *s, const char *req, const char *a, const char *b, int ea, int eb, int comp,
                int64_t t) {
    drift_error err = {0};
    drift_status rc = drift_traffic_stream_add(s, req, a, b, ea, eb, comp, t, NULL, &err);
    if (rc) fprintf(stderr, "add: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
}

/* 10% of the target's JSON answers are broken against a 1% budget: the
 * alarm fires, once, and its event names the pair the stream says. */
static void test_alarm_on_drift(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    int64_t raised_at = 0, raised_events = 0;
    for (int i = 1; i <= 1000; i++) {
        add(s, REQ_JSON, MSG_OBJ, uni() < 0.10 ? MSG_BAD : MSG_OBJ, 0, 0, 1, 1000 + i);
        size_t n = 0;
        const drift_traffic_stream_event *ev = drift_traffic_stream_events(s, &n);
        for (size_t k = 0; k < n; k++) {
            if (ev[k].event != DRIFT_ALARM_EV_RAISED) continue;
            assert_int_equal(ev[k].cls, DRIFT_TC_JSON);
            assert_int_equal(ev[k].pair, i);
            assert_true(ev[k].lo > ev[k].budget);
            drift_buf b = {0};
            assert_int_equal(drift_traffic_stream_describe_event(s, &ev[k], &b), 0);
            assert_non_null(strstr(b.data, "alarm raised: json at pair"));
            drift_buf_free(&b);
            raised_at = i;
            raised_events++;
        }
    }
    assert_int_equal(raised_events, 1);
    assert_true(raised_at > 10 && raised_at < 1000);
    const drift_alarm *a = drift_traffic_stream_alarm(s, DRIFT_TC_JSON);
    assert_non_null(a);
    assert_int_equal(a->state, DRIFT_ALARM_FIRING);
    assert_int_equal(drift_traffic_stream_class_get(s, DRIFT_TC_JSON)->raised_pair, raised_at);
    /* the exact class is not gated by default: counted, no alarm */
    assert_null(drift_traffic_stream_alarm(s, DRIFT_TC_EXACT));
    assert_int_equal(drift_traffic_stream_class_get(s, DRIFT_TC_EXACT)->flips,
                     drift_traffic_stream_class_get(s, DRIFT_TC_JSON)->flips);
    assert_int_equal(drift_traffic_stream_class_get(s, DRIFT_TC_JSON)->worse,
                     drift_traffic_stream_class_get(s, DRIFT_TC_JSON)->flips);
    drift_traffic_stream_free(s);
}

/* Identical answers: never an alarm, and the JSON class shows clear once
 * the evidence says the rate is under its budget. */
static void test_silent_when_identical(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    for (int i = 1; i <= 2000; i++) {
        add(s, REQ_JSON, MSG_OBJ, MSG_OBJ, 0, 0, 1, 0);
        size_t n = 0;
        const drift_traffic_stream_event *ev = drift_traffic_stream_events(s, &n);
        for (size_t k = 0; k < n; k++) assert_int_not_equal(ev[k].event, DRIFT_ALARM_EV_RAISED);
    }
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        const drift_alarm *a = drift_traffic_stream_alarm(s, c);
        if (a) assert_int_not_equal(a->state, DRIFT_ALARM_FIRING);
        assert_int_equal(drift_traffic_stream_class_get(s, c)->flips, 0);
    }
    assert_int_equal(drift_traffic_stream_alarm(s, DRIFT_TC_JSON)->state, DRIFT_ALARM_CLEAR);
    assert_int_equal(drift_traffic_stream_compared(s), 2000);
    drift_traffic_stream_free(s);
}

/* A mixed stream: its per-class counts equal drift_traffic_summarize's over
 * the same pairs (request errors left out where a class applies; math's
 * errors only once some pair is math-like). */
#define NMIX 300
static const char *mix_req[NMIX];
static int mix_err[NMIX][2];
static drift_traffic_pair mix_pair[NMIX];

static void feed_mix(drift_traffic_stream *s, int from, int to) {
    for (int i = from; i < to; i++) {
        uint64_t save = rng;
        rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
        double u = uni(), v = uni();
        rng = save;
        const char *req = i % 3 ? REQ_JSON : REQ_PLAIN;
        const char *a = MSG_OBJ, *b = MSG_OBJ;
        if (i % 3 == 0) a = MSG_MATH1, b = v < 0.3 ? MSG_MATH2 : MSG_MATH1;
        else if (v < 0.2) b = MSG_BAD;
        else if (v < 0.4) b = MSG_OBJ2;
        int ea = u < 0.04, eb = u > 0.95;
        if (i < 3) ea = 1; /* errors before the first math-like pair */
        mix_req[i] = req;
        mix_err[i][0] = ea;
        mix_err[i][1] = eb;
        drift_error err = {0};
        assert_int_equal(drift_traffic_stream_add(s, req, a, b, ea, eb, 1, 1700000000000LL + 700LL * i, &mix_pair[i],
                                                  &err),
                         DRIFT_OK);
    }
}

static void test_counts_match_summary(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    feed_mix(s, 0, NMIX);
    int perr[NMIX];
    for (int i = 0; i < NMIX; i++) perr[i] = mix_err[i][0] || mix_err[i][1];
    drift_traffic_summary sum;
    drift_traffic_summarize(mix_pair, perr, mix_req, NMIX, 0, 0, NULL, &sum);
    long errors = 0;
    for (int i = 0; i < NMIX; i++) errors += perr[i];
    assert_int_equal(drift_traffic_stream_errors(s), errors);
    assert_int_equal(drift_traffic_stream_compared(s), NMIX - errors);
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        const drift_traffic_stream_class *k = drift_traffic_stream_class_get(s, c);
        assert_int_equal(k->n, sum.cls[c].n);
        assert_int_equal(k->flips, sum.cls[c].flips);
        assert_int_equal(k->left_out, sum.cls[c].left_out);
        assert_int_equal(k->worse, sum.cls[c].worse);
    }
    assert_true(sum.cls[DRIFT_TC_MATH].flips > 0 && sum.cls[DRIFT_TC_JSON].flips > 0);
    assert_true(sum.cls[DRIFT_TC_MATH].left_out >= 3);
    drift_traffic_stream_free(s);
}

static void test_windows(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    drift_error err = {0};
    assert_int_equal(drift_traffic_stream_set_window(s, 60000, &err), DRIFT_OK);
    /* minute 0: 5 pairs, 1 flip; minute 2: 3 pairs, 3 flips, 1 error */
    for (int i = 0; i < 5; i++) add(s, REQ_JSON, MSG_OBJ, i == 2 ? MSG_BAD : MSG_OBJ, 0, 0, 1, 60000 * 100 + i * 1000);
    for (int i = 0; i < 3; i++) add(s, REQ_JSON, MSG_OBJ, MSG_BAD, 0, 0, 1, 60000 * 102 + 5);
    add(s, REQ_JSON, NULL, NULL, 0, 1, 1, 60000 * 102 + 7);
    add(s, REQ_JSON, MSG_OBJ, MSG_OBJ, 0, 0, 0, 60000 * 102 + 9); /* not comparable */
    assert_int_equal(drift_traffic_stream_set_window(s, 1000, &err), DRIFT_ERR_INVALID);
    size_t n = 0;
    int64_t dropped = -1;
    const drift_traffic_window *w = drift_traffic_stream_windows(s, &n, &dropped);
    assert_int_equal(n, 2);
    assert_int_equal(dropped, 0);
    assert_int_equal(w[0].start_ms, 6000000);
    assert_int_equal(w[0].pairs, 5);
    assert_int_equal(w[0].flips[DRIFT_TC_JSON], 1);
    assert_int_equal(w[1].start_ms, 6120000);
    assert_int_equal(w[1].pairs, 5);
    assert_int_equal(w[1].compared, 3);
    assert_int_equal(w[1].flips[DRIFT_TC_JSON], 3);
    assert_int_equal(w[1].left_out[DRIFT_TC_JSON], 1);
    /* window 0's bounds are the alarm's after its 5 pairs: 1 flip in 5 */
    drift_alarm a;
    assert_int_equal(drift_alarm_init(&a, "json", 0.01, 0.05, &err), DRIFT_OK);
    for (int i = 0; i < 5; i++) drift_alarm_add(&a, i == 2);
    double lo, hi;
    drift_alarm_bounds(&a, &lo, &hi);
    assert_true(w[0].lo[DRIFT_TC_JSON] == lo && w[0].hi[DRIFT_TC_JSON] == hi);
    assert_true(w[1].hi[DRIFT_TC_JSON] > w[0].hi[DRIFT_TC_JSON]);
    assert_true(isnan(w[0].lo[DRIFT_TC_EXACT]));
    assert_int_equal(drift_traffic_stream_not_comparable(s), 1);
    drift_traffic_stream_free(s);
}

static void test_prom(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    for (int i = 0; i < 400; i++) add(s, REQ_JSON, MSG_OBJ, i % 4 ? MSG_OBJ : MSG_BAD, 0, 0, 1, 0);
    add(s, REQ_JSON, NULL, NULL, 1, 0, 1, 0);
    drift_prom p;
    drift_prom_init(&p);
    drift_error err = {0};
    assert_int_equal(drift_traffic_stream_write_prom(s, &p, &err), DRIFT_OK);
    char *t = drift_prom_steal(&p);
    drift_prom_free(&p);
    assert_non_null(t);
    assert_non_null(strstr(t, "# TYPE driftbench_traffic_pairs_total counter\ndriftbench_traffic_pairs_total 401\n"));
    assert_non_null(strstr(t, "driftbench_traffic_compared_total 400\n"));
    assert_non_null(strstr(t, "driftbench_traffic_errors_total 1\n"));
    assert_non_null(strstr(t, "driftbench_traffic_flips_total{class=\"json\"} 100\n"));
    assert_non_null(strstr(t, "driftbench_traffic_left_out_total{class=\"json\"} 1\n"));
    assert_non_null(strstr(t, "driftbench_alarm_firing{class=\"json\"} 1\n"));
    assert_null(strstr(t, "driftbench_traffic_sdr")); /* no embedder */
    free(t);
    drift_traffic_stream_free(s);
}

static void test_resume_exact(void **state) {
    (void)state;
    drift_error err = {0};
    drift_traffic_stream *all = new_stream(0.05), *half = new_stream(0.05);
    assert_int_equal(drift_traffic_stream_set_window(all, 30000, &err), DRIFT_OK);
    assert_int_equal(drift_traffic_stream_set_window(half, 30000, &err), DRIFT_OK);
    feed_mix(all, 0, NMIX);
    feed_mix(half, 0, NMIX / 2);
    char *snap = drift_traffic_stream_to_json(half);
    assert_non_null(snap);
    drift_traffic_stream_free(half);
    drift_traffic_stream *back = NULL;
    assert_int_equal(drift_traffic_stream_from_json(snap, NULL, NULL, &back, &err), DRIFT_OK);
    char *again = drift_traffic_stream_to_json(back);
    assert_string_equal(snap, again);
    feed_mix(back, NMIX / 2, NMIX);
    char *ja = drift_traffic_stream_to_json(all), *jb = drift_traffic_stream_to_json(back);
    assert_string_equal(ja, jb);
    size_t na = 0, nb = 0;
    drift_traffic_stream_windows(all, &na, NULL);
    assert_true(na > 3);
    drift_traffic_stream_windows(back, &nb, NULL);
    assert_int_equal(na, nb);

    /* a snapshot taken before the code class (8 classes) resumes with code at
     * its start: the same state as this one's (no pair of the mix has code) */
    {
        json_t *o = json_loads(snap, JSON_DECODE_ANY, NULL);
        assert_non_null(o);
        assert_int_equal(json_array_size(json_object_get(o, "budget")), DRIFT_TC_COUNT);
        const char *top[] = {"budget", "classes", "alarms"};
        for (int k = 0; k < 3; k++) json_array_remove(json_object_get(o, top[k]), DRIFT_TC_CODE);
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(o, "windows"), i, w) {
            const char *arr[] = {"flips", "left_out", "lo", "hi", "state"};
            for (int k = 0; k < 5; k++) json_array_remove(json_object_get(w, arr[k]), DRIFT_TC_CODE);
        }
        char *old8 = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(o);
        drift_traffic_stream *b8 = NULL;
        assert_int_equal(drift_traffic_stream_from_json(old8, NULL, NULL, &b8, &err), DRIFT_OK);
        char *j8 = drift_traffic_stream_to_json(b8);
        assert_string_equal(j8, snap);
        free(j8);
        free(old8);
        drift_traffic_stream_free(b8);
    }

    /* a snapshot's errors */
    drift_traffic_stream *x = NULL;
    assert_int_equal(drift_traffic_stream_from_json("{", NULL, NULL, &x, &err), DRIFT_ERR_PARSE);
    assert_int_equal(drift_traffic_stream_from_json("{\"driftbench_traffic_stream\":2}", NULL, NULL, &x, &err),
                     DRIFT_ERR_INVALID);
    assert_int_equal(drift_traffic_stream_from_json(snap, (drift_guard *)snap, NULL, &x, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "guard off"));
    char *p = strstr(snap, "\"compared\":");
    assert_non_null(p);
    char *tampered = malloc(strlen(snap) + 8);
    memcpy(tampered, snap, (size_t)(p - snap));
    sprintf(tampered + (p - snap), "\"compared\":9%s", strchr(p, ','));
    assert_int_equal(drift_traffic_stream_from_json(tampered, NULL, NULL, &x, &err), DRIFT_ERR_INVALID);
    assert_null(x);
    free(tampered);
    free(snap);
    free(again);
    free(ja);
    free(jb);
    drift_traffic_stream_free(all);
    drift_traffic_stream_free(back);
}

/* The code class in the stream judge: run synchronously in _add, a flip
 * where one side's block does not compile; no code: not counted. */
static void test_code_class(void **state) {
    (void)state;
    drift_traffic_stream *s = new_stream(0.05);
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    add(s, req, "{\"content\":\"```python\\nx = 1\\n```\"}", "{\"content\":\"```python\\nx = (\\n```\"}", 0, 0, 1, 0);
    add(s, req, "{\"content\":\"plain\"}", "{\"content\":\"other\"}", 0, 0, 1, 0);
    const drift_traffic_stream_class *k = drift_traffic_stream_class_get(s, DRIFT_TC_CODE);
    assert_int_equal(k->n, 1);
    assert_int_equal(k->flips, 1);
    assert_int_equal(k->worse, 1);
    drift_traffic_stream_free(s);
}

static void test_bad_input(void **state) {
    (void)state;
    drift_traffic_stream *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_stream_new(NULL, 0, NULL, NULL, &s, &err), DRIFT_ERR_INVALID);
    assert_null(s);
    s = new_stream(0.05);
    /* a message that is not the message form: an error, nothing counted */
    assert_int_equal(drift_traffic_stream_add(s, REQ_JSON, "not json", MSG_OBJ, 0, 0, 1, 0, NULL, &err), DRIFT_ERR_PARSE);
    assert_int_equal(drift_traffic_stream_pairs(s), 0);
    assert_int_equal(drift_traffic_stream_set_window(s, -1, &err), DRIFT_ERR_INVALID);
    drift_traffic_stream_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alarm_on_drift),   cmocka_unit_test(test_silent_when_identical),
        cmocka_unit_test(test_counts_match_summary), cmocka_unit_test(test_windows),
        cmocka_unit_test(test_prom),             cmocka_unit_test(test_resume_exact),
        cmocka_unit_test(test_bad_input),        cmocka_unit_test(test_code_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
