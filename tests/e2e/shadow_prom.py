#!/usr/bin/env python3
"""shadow_prom.py FILE: checks a /metrics page against the Prometheus text exposition
format 0.0.4, strictly enough: HELP/TYPE before a family's samples, families contiguous and
declared once, sample lines "name{labels} value", histogram buckets cumulative with +Inf
equal to _count. Used by tests/e2e/shadow*.sh."""
import math, re, sys
fams, cur, order = {}, None, []
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)$')
hist = {}
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        kind, name = line.split(" ")[1], line.split(" ")[2]
        if kind == "TYPE":
            assert name not in fams, "declared twice: " + name
            fams[name] = line.split(" ")[3]
            assert fams[name] in ("counter", "gauge", "histogram", "untyped", "summary"), line
            cur = name
            order.append(name)
        continue
    assert not line.startswith("#"), line
    m = sample.match(line)
    assert m, "bad sample line: " + line
    name, value = m.group(1), m.group(4)
    v = float(value)
    base = cur
    if fams[cur] == "histogram":
        assert name in (cur + "_bucket", cur + "_sum", cur + "_count"), (cur, line)
        if name.endswith("_bucket"):
            le = re.search(r'le="([^"]*)"', m.group(3)).group(1)
            hist.setdefault(cur, []).append((float(le) if le != "+Inf" else math.inf, v))
        if name.endswith("_count"):
            b = hist[cur]
            assert all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), b
            assert b[-1][0] == math.inf and b[-1][1] == v, (b[-1], v)
    else:
        assert name == cur, "sample %s outside its family %s" % (name, cur)
        if fams[cur] == "counter":
            assert v >= 0, line
