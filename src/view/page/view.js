/* view.js - the results browser's page: reads the JSON API of
 * `driftbench view` and builds the document from it. Everything from the
 * store is hostile text: it enters the page through textContent only
 * (never innerHTML), and the server's Content-Security-Policy allows no
 * other script. The state (which comparison, filters, page, pair, run)
 * lives in the URL's hash, so every view can be linked and reloaded.
 * When a view is complete, <body data-ready="1">. */
'use strict';
(function () {
  const PAGE = 50;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function state() { return new URLSearchParams(location.hash.slice(1)); }
  function hashOf(params) {
    const s = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, v);
    return '#' + s.toString();
  }
  function link(text, params) { const a = el('a', text); a.href = hashOf(params); return a; }
  function cell(row, content, cls) {
    const td = el('td', null, cls);
    if (content instanceof Node) td.appendChild(content); else td.textContent = content === null || content === undefined ? '' : String(content);
    row.appendChild(td);
    return td;
  }
  function fmt(x, digits) { return x === null || x === undefined ? '' : Number(x).toFixed(digits); }
  function dd(list, name, value) { list.appendChild(el('dt', name)); list.appendChild(el('dd', value)); }

  async function api(path, params) {
    const u = new URL(path, location.href);
    for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
    const r = await fetch(u.toString(), { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
    let j = null;
    try { j = await r.json(); } catch (e) { j = null; }
    if (!r.ok) throw new Error((j && j.error) || ('HTTP ' + r.status));
    return j;
  }

  /* ---- word-level diff: LCS over whitespace-separated words ---- */
  function tokens(s) { return String(s || '').split(/(\s+)/).filter((t) => t !== ''); }
  const isSpace = (t) => /^\s+$/.test(t);
  /* kept[i] = 1 for the words of a (indices into a's words) in the common subsequence; same for b */
  function lcsKeep(A, B) {
    const ka = new Uint8Array(A.length), kb = new Uint8Array(B.length);
    let p = 0;
    while (p < A.length && p < B.length && A[p] === B[p]) { ka[p] = kb[p] = 1; p++; }
    let s = 0;
    while (s < A.length - p && s < B.length - p && A[A.length - 1 - s] === B[B.length - 1 - s]) {
      ka[A.length - 1 - s] = kb[B.length - 1 - s] = 1; s++;
    }
    const n = A.length - p - s, m = B.length - p - s;
    if (n > 0 && m > 0 && n * m <= 4000000) { /* larger middles show as wholly changed */
      const w = m + 1, L = new Uint32Array((n + 1) * w);
      for (let i = n - 1; i >= 0; i--)
        for (let j = m - 1; j >= 0; j--)
          L[i * w + j] = A[p + i] === B[p + j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
      let i = 0, j = 0;
      while (i < n && j < m) {
        if (A[p + i] === B[p + j]) { ka[p + i] = kb[p + j] = 1; i++; j++; }
        else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) i++;
        else j++;
      }
    }
    return [ka, kb];
  }
  /* renders text into node, the words not kept wrapped in <tag> */
  function renderSide(node, toks, kept, tag) {
    clear(node);
    let wi = 0;
    for (const t of toks) {
      if (isSpace(t)) { node.appendChild(document.createTextNode(t)); continue; }
      if (kept[wi++]) node.appendChild(document.createTextNode(t));
      else node.appendChild(el(tag, t));
    }
  }
  function renderDiff(a, b) {
    const ta = tokens(a), tb = tokens(b);
    const [ka, kb] = lcsKeep(ta.filter((t) => !isSpace(t)), tb.filter((t) => !isSpace(t)));
    renderSide($('diff-base'), ta, ka, 'del');
    renderSide($('diff-targ'), tb, kb, 'ins');
  }

  /* ---- views ---- */
  function renderRuns(runs) {
    $('store').textContent = runs.store || '';
    const body = $('runs').tBodies[0];
    clear(body);
    for (const r of runs.runs) {
      const tr = el('tr');
      cell(tr, link(r.label, { history: r.label }));
      cell(tr, r.target);
      cell(tr, r.responses - r.failed, 'num');
      cell(tr, r.failed, 'num');
      cell(tr, r.scored, 'num');
      cell(tr, r.started_at);
      cell(tr, r.finished_at || 'not finished');
      body.appendChild(tr);
    }
  }

  function renderComparisons(cmps) {
    const body = $('comparisons').tBodies[0];
    clear(body);
    for (const c of cmps.comparisons) {
      const tr = el('tr');
      cell(tr, c.baseline);
      cell(tr, link(c.target, { baseline: c.baseline, target: c.target }));
      cell(tr, c.pairs, 'num');
      cell(tr, c.counted, 'num');
      cell(tr, c.flips, 'num');
      cell(tr, c.workloads.map((w) => w.workload + ' ' + w.flips + '/' + w.counted).join(', '));
      body.appendChild(tr);
    }
  }

  function filtersFrom(s) {
    return {
      baseline: s.get('baseline'), target: s.get('target') || '', workload: s.get('workload') || '',
      flipped: s.get('flipped') || '', direction: s.get('direction') || '', config: s.get('config') || '',
      q: s.get('q') || '', offset: s.get('offset') || '',
    };
  }

  function applyFilters(offset) {
    const s = state();
    location.hash = hashOf({
      baseline: s.get('baseline'), target: $('f-target').value, workload: $('f-workload').value,
      flipped: $('f-flipped').checked ? '1' : '', direction: $('f-direction').value,
      config: $('f-config').value.trim(), q: $('f-q').value.trim(), offset: offset || '',
    });
  }

  async function renderPairs(s, runs) {
    const f = filtersFrom(s);
    $('pairs-title').textContent = f.baseline + ' against ' + (f.target || 'every other run');
    const sel = $('f-target');
    clear(sel);
    sel.appendChild(el('option', 'every other run')).value = '';
    for (const r of runs.runs) if (r.label !== f.baseline) sel.appendChild(el('option', r.label)).value = r.label;
    sel.value = f.target;
    $('f-workload').value = f.workload;
    $('f-flipped').checked = f.flipped === '1';
    $('f-direction').value = f.direction;
    $('f-config').value = f.config;
    $('f-q').value = f.q;
    const offset = parseInt(f.offset || '0', 10) || 0;
    const res = await api('/api/pairs', Object.assign({}, f, { offset: String(offset), limit: String(PAGE) }));
    $('pair-total').textContent = String(res.total);
    $('pair-all').textContent = String(res.all);
    const body = $('pairs').tBodies[0];
    clear(body);
    for (const p of res.pairs) {
      const tr = el('tr', null, p.flipped ? 'flip' : '');
      tr.dataset.workload = p.workload;
      tr.dataset.flipped = p.flipped ? '1' : '0';
      cell(tr, p.target);
      cell(tr, p.workload);
      cell(tr, link(p.prompt_id, { baseline: p.baseline, target: p.target, pair: String(p.response) }));
      cell(tr, p.replicate, 'num');
      cell(tr, p.baseline_label);
      cell(tr, p.target_label);
      cell(tr, p.flipped ? (p.direction || 'flip') : (p.counted ? '' : 'not counted'));
      cell(tr, fmt(p.risk, 3), 'num');
      body.appendChild(tr);
    }
    const pages = Math.max(1, Math.ceil(res.total / PAGE));
    $('page').textContent = 'page ' + (Math.floor(offset / PAGE) + 1) + ' of ' + pages;
    $('prev').disabled = offset <= 0;
    $('next').disabled = offset + PAGE >= res.total;
    $('prev').onclick = () => applyFilters(String(Math.max(0, offset - PAGE)));
    $('next').onclick = () => applyFilters(String(offset + PAGE));
  }

  async function renderPair(s) {
    const p = await api('/api/pair', { baseline: s.get('baseline'), target: s.get('target'), response: s.get('pair') });
    $('pair-title').textContent = p.prompt_id + ' (' + p.workload + ', replicate ' + p.replicate + ')';
    const facts = $('pair-facts');
    clear(facts);
    dd(facts, 'suite', p.suite);
    dd(facts, 'baseline', p.baseline + ': ' + p.baseline_label);
    dd(facts, 'target', p.target + ': ' + p.target_label);
    dd(facts, 'flip', p.flipped ? (p.direction || 'yes') : (p.counted ? 'no' : 'not counted (an error or no label)'));
    if (p.sdr !== null) dd(facts, 'SDR', fmt(p.sdr, 3));
    $('prompt-input').textContent = p.prompt.input || '';
    $('prompt-reference').textContent = p.prompt.reference === null ? '' : JSON.stringify(p.prompt.reference);
    const ba = p.baseline_answer, ta = p.target_answer;
    $('diff-base-title').textContent = 'baseline ' + p.baseline + (ba.error ? ' (failed: ' + ba.error + ')' : '');
    $('diff-targ-title').textContent = 'target ' + p.target + (ta.error ? ' (failed: ' + ta.error + ')' : '');
    renderDiff(ba.text || '', ta.text || '');
    const body = $('scores').tBodies[0];
    clear(body);
    for (const [side, a] of [['baseline', ba], ['target', ta]])
      for (const sc of a.scores) {
        const tr = el('tr');
        cell(tr, side + (sc.latest ? '' : ' (older)'));
        cell(tr, sc.evaluator);
        cell(tr, sc.label);
        cell(tr, fmt(sc.value, 4), 'num');
        cell(tr, el('code', sc.detail === null ? '' : JSON.stringify(sc.detail)));
        body.appendChild(tr);
      }
    const risk = $('risk');
    clear(risk);
    const r = p.risk_detail || {};
    if (r.error) dd(risk, 'risk', 'unknown: ' + r.error);
    else {
      dd(risk, 'score', fmt(r.score, 4) + ' (' + r.version + ')');
      dd(risk, 'smallest margin', fmt(r.min_margin, 3) + ' nats at token ' + r.min_margin_token + ' of ' + r.tokens);
      dd(risk, 'near ties', r.near_ties);
      dd(risk, 'mean entropy', fmt(r.mean_entropy, 3) + ' nats');
    }
  }

  async function renderHistory(label) {
    const h = await api('/api/history', { label: label });
    $('history-title').textContent = h.label + ' (' + h.identity + ')';
    const eb = $('endpoints').tBodies[0];
    clear(eb);
    for (const e of h.endpoint_history) {
      const tr = el('tr');
      cell(tr, e.target); cell(tr, e.first_at); cell(tr, e.last_at); cell(tr, e.begins, 'num');
      eb.appendChild(tr);
    }
    const hb = $('history').tBodies[0];
    clear(hb);
    for (const r of h.history) {
      const tr = el('tr');
      cell(tr, r.this ? r.label + ' (this run)' : link(r.label, { history: r.label }));
      cell(tr, [r.same_identity ? 'stack' : '', r.same_config ? 'configuration' : ''].filter(Boolean).join(', '));
      cell(tr, r.target);
      cell(tr, r.responses - r.failed, 'num');
      cell(tr, r.started_at);
      cell(tr, r.finished_at || 'not finished');
      hb.appendChild(tr);
    }
  }

  async function render() {
    document.body.dataset.ready = '0';
    const err = $('error');
    err.hidden = true;
    const s = state();
    const base = s.get('baseline'), hist = s.get('history'), pair = s.get('pair');
    $('pairs-section').hidden = !(base && !pair && !hist);
    $('pair-section').hidden = !(base && pair && !hist);
    $('history-section').hidden = !hist;
    try {
      const [runs, cmps] = await Promise.all([api('/api/runs'), api('/api/comparisons')]);
      renderRuns(runs);
      renderComparisons(cmps);
      if (hist) await renderHistory(hist);
      else if (base && pair) await renderPair(s);
      else if (base) await renderPairs(s, runs);
    } catch (e) {
      err.textContent = String(e && e.message ? e.message : e);
      err.hidden = false;
    }
    document.body.dataset.ready = '1';
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); applyFilters(''); });
    for (const id of ['f-workload', 'f-flipped', 'f-direction', 'f-target'])
      $(id).addEventListener('change', () => applyFilters(''));
    window.addEventListener('hashchange', render);
    render();
  });
})();
