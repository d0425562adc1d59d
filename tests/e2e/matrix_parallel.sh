#!/usr/bin/env bash
# matrix_parallel.sh - `matrix --parallel 2 --no-score` then `score`, against
# `matrix` one configuration at a time, scored as it goes: the same answers
# (texts and logprobs-free rows, every configuration) and the same scores;
# --no-score stores no score; with -v a line per finished configuration;
# a bad --parallel is exit 2.
. "$(dirname "$0")/lib.sh"
work=$T
cd "$S" || fail "cd $S"   # the example spec's model paths are relative to the repository root
spec=tests/data/matrix/example.json
"$D" matrix --spec "$spec" --db "$work/one.db" >/dev/null 2>"$work/one.err" || { cat "$work/one.err"; echo "FAIL: matrix"; exit 1; }
"$D" -v matrix --spec "$spec" --db "$work/two.db" --parallel 2 --no-score >/dev/null 2>"$work/two.err" ||
    { cat "$work/two.err"; echo "FAIL: matrix --parallel 2 --no-score"; exit 1; }
configs=$(sqlite3 "$work/two.db" "select count(*) from runs") || fail "sqlite3 cannot count two.db's runs"
cells=$(grep -Ec "^matrix \[[0-9]+/$configs\] '[^']+': done in [0-9.]+ s, [0-9]+ answers and [0-9]+ errors stored now\$" "$work/two.err")
[ "$configs" -ge 2 ] && [ "$cells" = "$configs" ] || { echo "FAIL: -v printed $cells lines for $configs configurations"; cat "$work/two.err"; exit 1; }
grep -q "^matrix \[$configs/$configs\] " "$work/two.err" || { echo "FAIL: no last cell line"; cat "$work/two.err"; exit 1; }
n=$(sqlite3 "$work/two.db" "select count(*) from scores") || fail "sqlite3 cannot count two.db's scores"
[ "$n" = 0 ] || { echo "FAIL: --no-score stored $n scores"; exit 1; }
"$D" score --db "$work/two.db" >/dev/null 2>&1 || { echo "FAIL: score"; exit 1; }
q="select r.label, p.prompt_id, x.replicate, x.failed, coalesce(x.text, ''), coalesce(s.evaluator, ''), coalesce(s.label, -1), coalesce(s.value, -1)
   from responses x join runs r on r.id = x.run_id join prompts p on p.id = x.prompt_rowid
   left join scores s on s.response_id = x.id order by 1, 2, 3"
sqlite3 "$work/one.db" "$q" >"$work/one.txt" || fail "sqlite3 cannot read one.db"
sqlite3 "$work/two.db" "$q" >"$work/two.txt" || fail "sqlite3 cannot read two.db"
rows=$(wc -l <"$work/one.txt")
[ "$rows" -ge 100 ] || { echo "FAIL: only $rows answers"; exit 1; }
cmp -s "$work/one.txt" "$work/two.txt" || { echo "FAIL: answers or scores differ"; diff "$work/one.txt" "$work/two.txt" | head; exit 1; }
scored=$(sqlite3 "$work/two.db" "select count(*) from scores") || fail "sqlite3 cannot count the scores"
[ "$scored" -gt 0 ] || { echo "FAIL: nothing scored after score"; exit 1; }
"$D" matrix --spec "$spec" --db "$work/x.db" --parallel 0 2>"$work/bad.err"; rc=$?
[ "$rc" = 2 ] && grep -q -- "--parallel" "$work/bad.err" || { echo "FAIL: --parallel 0 gave $rc"; cat "$work/bad.err"; exit 1; }
echo "ok: $rows answers, the same one at a time and two side by side with scoring after; $scored scores"
