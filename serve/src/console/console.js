// The live console of `aisc serve` (docs/serve.md, "Console"). Plain
// browser JavaScript, no build step, no library: everything comes from
// the run API of the server that served this file.
'use strict';

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem('ais-token') || '',
  runs: [],
  selected: null,      // run id
  run: null,           // the selected run's JSON
  stream: null,        // AbortController of its event stream
  lastEvent: 0,
  ops: new Map(),      // node key -> {running, ok, failed, runs}
  events: [],          // finished op events (timeline)
  started: new Map(),  // "frame/op" -> op_start data, while running
  texts: new Map(),    // node key -> streamed text
  chosen: null,        // node key shown in the text pane
  confirms: new Map(), // open questions: request -> data
};

// A token given as `#token=...` (never sent to the server in the URL).
(function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    state.token = decodeURIComponent(m[1]);
    sessionStorage.setItem('ais-token', state.token);
    history.replaceState(null, '', location.pathname);
  }
})();

function notice(text) { $('notice').textContent = text || ''; }

async function api(method, path, body) {
  const headers = {};
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) {
    $('token-box').hidden = false;
    throw new Error('this server needs its bearer token');
  }
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!r.ok) {
    const e = json && json.error;
    throw new Error(e ? e.code + ': ' + e.message : method + ' ' + path + ': ' + r.status);
  }
  return json !== null ? json : text;
}

const key = (d) => 'f' + d.flow_id + 'r' + d.region + 'o' + d.op;
const cost = (run) => {
  const c = run.summary && run.summary.cost_usd;
  return typeof c === 'number' ? '$' + c.toFixed(4) : '';
};

// ---- runs list -----------------------------------------------------------

async function loadPrograms() {
  const { programs } = await api('GET', '/v1/programs');
  const sel = $('program');
  sel.textContent = '';
  for (const p of programs) {
    for (const f of p.flows) {
      const o = document.createElement('option');
      o.value = JSON.stringify({ program: p.file, entry: f.name });
      o.textContent = p.file + ' · ' + f.name + '(' + f.params.join(', ') + ')';
      o.dataset.params = JSON.stringify(f.params);
      sel.appendChild(o);
    }
  }
  sel.dispatchEvent(new Event('change'));
}

$('program').addEventListener('change', () => {
  const o = $('program').selectedOptions[0];
  if (!o) return;
  const params = JSON.parse(o.dataset.params);
  const args = {};
  for (const p of params) args[p] = '';
  $('args').value = JSON.stringify(args);
});

$('start').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  notice('');
  try {
    const { program, entry } = JSON.parse($('program').value);
    const args = JSON.parse($('args').value || '{}');
    const run = await api('POST', '/v1/runs', { program, entry, args });
    await refreshRuns();
    select(run.id);
  } catch (e) { notice(e.message); }
});

async function refreshRuns() {
  const { runs } = await api('GET', '/v1/runs');
  state.runs = runs.slice().reverse(); // newest first
  const ul = $('runs');
  ul.textContent = '';
  for (const r of state.runs) {
    const li = document.createElement('li');
    li.dataset.id = r.id;
    li.dataset.status = r.status;
    if (r.id === state.selected) li.className = 'selected';
    const id = document.createElement('span'); id.className = 'rid'; id.textContent = r.id;
    const st = document.createElement('span'); st.className = 'status ' + r.status; st.textContent = r.status;
    const pg = document.createElement('span'); pg.className = 'prog'; pg.textContent = r.program || '';
    const c = document.createElement('span'); c.className = 'cost'; c.textContent = cost(r);
    li.append(id, st, pg, c);
    li.addEventListener('click', () => select(r.id));
    ul.appendChild(li);
  }
  if (state.selected) {
    const mine = runs.find((r) => r.id === state.selected);
    if (mine) showRun(mine);
  }
}

// ---- one run -------------------------------------------------------------

async function select(id) {
  if (state.stream) state.stream.abort();
  Object.assign(state, {
    selected: id, run: null, lastEvent: 0, ops: new Map(), events: [],
    started: new Map(), texts: new Map(), chosen: null, confirms: new Map(),
  });
  for (const li of $('runs').children) li.classList.toggle('selected', li.dataset.id === id);
  $('fork-form').hidden = true;
  $('run').hidden = false;
  $('run-id').textContent = id;
  $('text').textContent = '';
  $('printed').textContent = '';
  $('graph').textContent = '';
  try {
    const svg = await api('GET', '/v1/runs/' + encodeURIComponent(id) + '/graph');
    if (state.selected !== id) return;
    $('graph').innerHTML = svg;
    for (const n of $('graph').querySelectorAll('.node')) {
      n.addEventListener('click', () => choose(n.dataset.key));
    }
  } catch (e) {
    $('graph').textContent = e.message;
  }
  showRun(await api('GET', '/v1/runs/' + encodeURIComponent(id)));
  follow(id);
}

function showRun(run) {
  state.run = run;
  const st = $('run-status');
  st.textContent = run.status;
  st.className = 'status ' + run.status;
  $('run').dataset.status = run.status;
  $('run-cost').textContent = cost(run);
  const final = !['queued', 'running'].includes(run.status);
  $('cancel').disabled = final;
  const paused = run.status === 'paused' && run.error && run.error.cause === 'run.paused';
  $('resume').disabled = !['failed', 'cancelled', 'paused'].includes(run.status) || paused;
  $('ask').hidden = !paused;
  if (paused) $('ask-question').textContent = run.error.message;
  const res = $('result');
  res.className = '';
  if (run.status === 'succeeded') {
    res.textContent = '→ ' + (typeof run.result === 'string' ? run.result : JSON.stringify(run.result));
  } else if (run.error && !paused) {
    res.className = 'error';
    res.textContent = run.error.code + ': ' + run.error.message;
  } else {
    res.textContent = '';
  }
  // Questions open now (also those asked before the page was opened).
  for (const q of run.confirm || []) state.confirms.set(q.request, q);
  if (!run.confirm && final) state.confirms.clear();
  showConfirm();
}

// The run's Server-Sent Events, read with fetch (EventSource cannot send
// the bearer token). The server ends the stream after `done`.
async function follow(id) {
  const ctl = new AbortController();
  state.stream = ctl;
  const headers = {};
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  let r;
  try {
    r = await fetch('/v1/runs/' + encodeURIComponent(id) + '/events?last_event_id=' + state.lastEvent,
      { headers, signal: ctl.signal });
  } catch (_) { return; }
  if (!r.ok || !r.body) { notice('event stream: ' + r.status); return; }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch (_) { return; }
    if (chunk.done) break;
    buf += dec.decode(chunk.value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let ev = { id: 0, kind: 'message', data: '' };
      for (const line of frame.split('\n')) {
        if (line.startsWith('id:')) ev.id = Number(line.slice(3).trim());
        else if (line.startsWith('event:')) ev.kind = line.slice(6).trim();
        else if (line.startsWith('data:')) ev.data += line.slice(5).trim();
      }
      if (!ev.data || state.selected !== id) continue;
      state.lastEvent = Math.max(state.lastEvent, ev.id);
      onEvent(ev.kind, JSON.parse(ev.data));
    }
  }
  if (state.selected === id && state.stream === ctl) {
    showRun(await api('GET', '/v1/runs/' + encodeURIComponent(id)));
    refreshRuns().catch((e) => notice(e.message));
  }
}

function node(k) {
  return $('graph').querySelector('.node[data-key="' + k + '"]');
}

function mark(k, how) {
  const n = node(k);
  if (!n) return;
  n.classList.remove('live-running', 'live-ok', 'live-failed');
  n.classList.add('live-' + how);
}

function onEvent(kind, d) {
  switch (kind) {
    case 'status':
      if (state.run) showRun(Object.assign({}, state.run, { status: d.status }));
      break;
    case 'op_start':
      state.started.set(d.frame + '/' + d.op, d);
      mark(key(d), 'running');
      drawTimeline();
      break;
    case 'op': {
      state.started.delete(d.frame + '/' + d.op);
      state.events.push(d);
      // A `pause` that stopped the run waits for its answer.
      const waits = d.opcode === 'pause' && d.error === 'run.paused';
      mark(key(d), d.status === 'ok' ? 'ok' : waits ? 'running' : 'failed');
      drawTimeline();
      break;
    }
    case 'text': {
      const k = key(d);
      state.texts.set(k, (state.texts.get(k) || '') + d.text);
      if (!state.chosen || state.chosen === k) choose(k);
      break;
    }
    case 'text_reset':
      state.texts.set(key(d), '');
      break;
    case 'print':
      $('printed').textContent += d.line + '\n';
      break;
    case 'confirm':
      state.confirms.set(d.request, d);
      showConfirm();
      break;
    case 'confirmed':
      state.confirms.delete(d.request);
      showConfirm();
      break;
    case 'done':
      showRun(Object.assign({}, state.run || {}, d));
      break;
    default:
      break;
  }
}

function choose(k) {
  state.chosen = k;
  for (const n of $('graph').querySelectorAll('.node.chosen')) n.classList.remove('chosen');
  const n = node(k);
  if (n) n.classList.add('chosen');
  const title = n && n.querySelector('title');
  $('text-op').textContent = title ? '· ' + title.textContent : '';
  $('text').textContent = state.texts.get(k) || '';
}

function showConfirm() {
  const first = state.confirms.values().next();
  $('confirm').hidden = first.done;
  if (!first.done) {
    const c = first.value;
    $('confirm-question').textContent = c.agent + ' wants to run the destructive tool `' + c.tool +
      '` with ' + JSON.stringify(c.args);
    $('confirm').dataset.request = c.request;
  }
}

// ---- timeline with the critical path -------------------------------------

// The path back from the op that ended last, through the op whose end made
// each one ready (as `aisc report` draws it).
function criticalPath(evs) {
  const live = evs.filter((e) => e.status !== 'cancelled');
  if (!live.length) return new Set();
  let cur = live.reduce((a, b) => (b.end_ns > a.end_ns ? b : a));
  const path = new Set([cur]);
  for (;;) {
    const ready = cur.ready_ns || 0;
    let prev = null;
    for (const e of live) {
      if (!path.has(e) && e.end_ns <= ready && (!prev || e.end_ns > prev.end_ns)) prev = e;
    }
    if (!prev || ready === 0) break;
    path.add(prev);
    cur = prev;
  }
  return path;
}

function drawTimeline() {
  const NS = 'http://www.w3.org/2000/svg';
  const running = [...state.started.values()];
  const all = state.events.concat(running.map((d) => Object.assign({}, d, { end_ns: null, status: 'running' })));
  const box = $('timeline');
  box.textContent = '';
  if (!all.length) return;
  const shown = all.filter((e) => e.status === 'running' || e.end_ns - e.start_ns > 0 || e.llm || e.tool);
  const rows = shown.length ? shown : all;
  const t0 = Math.min(...rows.map((e) => e.start_ns));
  const ends = rows.map((e) => e.end_ns || e.start_ns);
  const t1 = Math.max(...ends, t0 + 1);
  const W = Math.max(600, box.clientWidth - 20), L = 190, H = 16;
  const cp = criticalPath(state.events);
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('width', W);
  svg.setAttribute('height', rows.length * (H + 3) + 20);
  rows.sort((a, b) => a.start_ns - b.start_ns).forEach((e, i) => {
    const y = i * (H + 3);
    const label = document.createElementNS(NS, 'text');
    label.setAttribute('x', 0); label.setAttribute('y', y + 12);
    label.textContent = e.flow + ' · ' + e.opcode + (e.tool ? ' ' + e.tool : '') + (e.llm ? ' ' + e.llm.model : '');
    const bar = document.createElementNS(NS, 'rect');
    const x = L + (e.start_ns - t0) / (t1 - t0) * (W - L - 10);
    const end = e.end_ns === null ? t1 : e.end_ns;
    bar.setAttribute('x', x);
    bar.setAttribute('y', y);
    bar.setAttribute('height', H);
    bar.setAttribute('width', Math.max(2, (end - e.start_ns) / (t1 - t0) * (W - L - 10)));
    bar.setAttribute('class', 'bar' + (e.status === 'running' ? ' running' : e.status !== 'ok' ? ' failed' : '') + (cp.has(e) ? ' cp' : ''));
    const tip = document.createElementNS(NS, 'title');
    tip.textContent = ((end - e.start_ns) / 1e6).toFixed(1) + ' ms' + (cp.has(e) ? ' (critical path)' : '');
    bar.appendChild(tip);
    svg.append(label, bar);
  });
  box.appendChild(svg);
}

// ---- buttons -------------------------------------------------------------

async function act(path, body) {
  notice('');
  const id = state.selected;
  try {
    const run = await api('POST', '/v1/runs/' + encodeURIComponent(id) + path, body);
    showRun(run);
    if (path === '/resume') follow(id);
    await refreshRuns();
  } catch (e) { notice(e.message); }
}

$('fork').addEventListener('click', async () => {
  const form = $('fork-form');
  if (!form.hidden) { form.hidden = true; return; }
  notice('');
  try {
    const { steps } = await api('GET', '/v1/runs/' + encodeURIComponent(state.selected) + '/steps');
    const sel = $('fork-step');
    sel.textContent = '';
    for (const st of steps) {
      const o = document.createElement('option');
      o.value = st.step;
      const v = st.value === null || st.value === undefined ? '' : JSON.stringify(st.value);
      o.textContent = st.step + ' · ' + st.op + ' · ' + (v.length > 60 ? v.slice(0, 60) + '…' : v);
      sel.appendChild(o);
    }
    if (!steps.length) notice('this run has no journal steps to fork at');
    form.hidden = !steps.length;
  } catch (e) { notice(e.message); }
});
$('fork-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  notice('');
  const raw = $('fork-value').value;
  const body = { at: Number($('fork-step').value) };
  if (raw !== '') {
    try { body.set = JSON.parse(raw); } catch (_) { body.set = raw; }
  }
  try {
    const run = await api('POST', '/v1/runs/' + encodeURIComponent(state.selected) + '/fork', body);
    $('fork-form').hidden = true;
    $('fork-value').value = '';
    await refreshRuns();
    select(run.id);
  } catch (e) { notice(e.message); }
});
$('cancel').addEventListener('click', () => act('/cancel'));
$('resume').addEventListener('click', () => act('/resume'));
$('answer-btn').addEventListener('click', () => {
  const raw = $('answer').value;
  let input = raw;
  try { input = JSON.parse(raw); } catch (_) { input = raw; }
  act('/resume', { input });
});
$('approve').addEventListener('click', () =>
  act('/confirm', { allow: true, request: Number($('confirm').dataset.request) }));
$('deny').addEventListener('click', () =>
  act('/confirm', { allow: false, request: Number($('confirm').dataset.request) }));
$('token-btn').addEventListener('click', () => {
  state.token = $('token').value.trim();
  sessionStorage.setItem('ais-token', state.token);
  $('token-box').hidden = true;
  start();
});

async function start() {
  try {
    await loadPrograms();
    await refreshRuns();
  } catch (e) { notice(e.message); }
}

start();
setInterval(() => { refreshRuns().catch((e) => notice(e.message)); }, 1500);
