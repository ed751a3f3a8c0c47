// Drives `aisc serve`'s console (GET /console) in a headless Chromium over
// the DevTools protocol (the `ws` package; no browser download), as a
// person would: start a run and watch it end, start a run that pauses,
// type the answer and press Answer, watch it end.
//
//   node drive.js BASE_URL SHOT_DIR
//
// Prints one JSON line: what the page showed at each step, and every
// console error or exception. Chromium comes from $AIS_CHROMIUM or PATH;
// `ws` from $AIS_NPM_DIR/node_modules.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const npmDir = process.env.AIS_NPM_DIR || path.join(__dirname, '..', '..', '..', 'target', 'npm');
const WebSocket = require(path.join(npmDir, 'node_modules', 'ws'));

const [base, shots] = process.argv.slice(2);
const chromium = process.env.AIS_CHROMIUM || 'chromium';
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ais-chromium-'));
const proc = spawn(chromium, [
  '--headless=new', '--remote-debugging-port=0', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--no-default-browser-check', '--disable-extensions',
  '--user-data-dir=' + profile, '--window-size=1500,1000', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe'] });

function fail(msg) {
  process.stderr.write('drive.js: ' + msg + '\n');
  try { proc.kill('SIGKILL'); } catch (_) { /* gone */ }
  process.exit(1);
}
const timer = setTimeout(() => fail('the console did not get there in 120 s'), 120000);
proc.on('error', (e) => fail('cannot start ' + chromium + ': ' + e.message));

let stderr = '';
let started = false;
proc.stderr.on('data', (d) => {
  stderr += d.toString();
  const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
  if (m && !started) { started = true; run(m[1]).catch((e) => fail(e.stack || String(e))); }
});

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

async function run(url) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise((ok, ko) => { ws.once('open', ok); ws.once('error', ko); });
  let next = 1;
  const waiting = new Map();
  const listeners = [];
  ws.on('message', (raw) => {
    const msg = JSON.parse(raw.toString());
    if (msg.id && waiting.has(msg.id)) {
      const { ok, ko } = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error) ko(new Error(JSON.stringify(msg.error))); else ok(msg.result);
    } else if (msg.method) {
      listeners.forEach((l) => l(msg));
    }
  });
  const send = (method, params, sessionId) => new Promise((ok, ko) => {
    const id = next++;
    waiting.set(id, { ok, ko });
    ws.send(JSON.stringify({ id, method, params: params || {}, sessionId }));
  });
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const s = (m, p) => send(m, p, sessionId);
  const errors = [];
  listeners.push((msg) => {
    if (msg.sessionId !== sessionId) return;
    if (msg.method === 'Runtime.consoleAPICalled' && (msg.params.type === 'error' || msg.params.type === 'assert')) {
      errors.push('console.' + msg.params.type + ': ' + msg.params.args.map((a) => a.value || a.description).join(' '));
    } else if (msg.method === 'Runtime.exceptionThrown') {
      errors.push('exception: ' + (msg.params.exceptionDetails.exception || {}).description);
    } else if (msg.method === 'Log.entryAdded' && msg.params.entry.level === 'error') {
      errors.push('log: ' + msg.params.entry.text);
    }
  });
  await s('Runtime.enable');
  await s('Log.enable');
  await s('Page.enable');
  await s('Emulation.setDeviceMetricsOverride', { width: 1500, height: 1000, deviceScaleFactor: 1, mobile: false });
  const loaded = new Promise((ok) => listeners.push((m) => { if (m.sessionId === sessionId && m.method === 'Page.loadEventFired') ok(); }));
  await s('Page.navigate', { url: base + '/console' });
  await loaded;
  const evaluate = async (expr) => {
    const r = await s('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error('evaluate failed: ' + expr + ': ' + JSON.stringify(r.exceptionDetails));
    return r.result.value;
  };
  const until = async (what, expr) => {
    for (let i = 0; i < 600; i++) {
      const v = await evaluate(expr);
      if (v) return v;
      await sleep(100);
    }
    fail('the page never showed ' + what + '; errors: ' + JSON.stringify(errors));
    return null;
  };
  // A real mouse click in the middle of the element.
  const click = async (selector) => {
    const box = await evaluate(`(function(){var n=document.querySelector(${JSON.stringify(selector)}); if(!n)return null; n.scrollIntoView({block:'center'}); var r=n.getBoundingClientRect(); return {x:r.left+r.width/2,y:r.top+r.height/2};})()`);
    if (!box) fail('nothing matches ' + selector);
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
      await s('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
    }
  };
  const type = async (selector, text) => {
    await evaluate(`(function(){var n=document.querySelector(${JSON.stringify(selector)}); n.focus(); n.select && n.select(); return 0;})()`);
    await s('Input.insertText', { text });
  };
  const shot = async (name) => {
    if (!shots) return;
    await evaluate('window.scrollTo(0,0); 0');
    const { data } = await s('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(path.join(shots, name), Buffer.from(data, 'base64'));
  };
  const chooseProgram = (file) => evaluate(`(function(){var s=document.getElementById('program'); for (var o of s.options) { if (JSON.parse(o.value).program === ${JSON.stringify(file)}) { s.value = o.value; s.dispatchEvent(new Event('change')); return true; } } return false;})()`);
  const view = () => evaluate(`({
    status: document.getElementById('run-status').textContent,
    id: document.getElementById('run-id').textContent,
    result: document.getElementById('result').textContent,
    nodes: document.querySelectorAll('#graph .node').length,
    lit: document.querySelectorAll('#graph .node.live-ok').length,
    failed: document.querySelectorAll('#graph .node.live-failed').length,
    bars: document.querySelectorAll('#timeline .bar').length,
    critical: document.querySelectorAll('#timeline .bar.cp').length,
    text: document.getElementById('text').textContent,
    question: document.getElementById('ask').hidden ? null : document.getElementById('ask-question').textContent,
    listed: [...document.querySelectorAll('#runs li')].map(function(li){return [li.dataset.id, li.dataset.status];}),
  })`);

  // 1. A run that completes.
  await until('the programs', "document.querySelectorAll('#program option').length > 0");
  if (!await chooseProgram('echo.ais')) fail('echo.ais is not offered');
  await type('#args', '{"topic": "bees"}');
  await click('#start-btn');
  await until('the first run', "document.getElementById('run-id').textContent !== ''");
  const during = await view();
  await until('the first run succeeding', "document.getElementById('run-status').textContent === 'succeeded' && document.querySelectorAll('#timeline .bar.cp').length > 0");
  await sleep(300);
  const completed = await view();
  await shot('console-run.png');

  // 2. A run that pauses, answered from the page.
  if (!await chooseProgram('approve.ais')) fail('approve.ais is not offered');
  await type('#args', '{"topic": "refund"}');
  await click('#start-btn');
  await until('the second run', `document.getElementById('run-id').textContent !== ${JSON.stringify(completed.id)}`);
  await until('the question', "!document.getElementById('ask').hidden");
  const paused = await view();
  await type('#answer', 'approved by the console');
  await shot('console-pause.png');
  await click('#answer-btn');
  await until('the answered run succeeding', "document.getElementById('run-status').textContent === 'succeeded'");
  await sleep(300);
  const answered = await view();

  // 3. Fork the first run at its "Risks" step with another value.
  await click(`#runs li[data-id="${completed.id}"]`);
  await until('the first run again', `document.getElementById('run-id').textContent === ${JSON.stringify(completed.id)} && document.getElementById('run-status').textContent === 'succeeded'`);
  await click('#fork');
  await until('the steps', "document.querySelectorAll('#fork-step option').length > 0");
  const picked = await evaluate(`(function(){var s=document.getElementById('fork-step'); for (var o of s.options) { if (o.textContent.indexOf('Risks') >= 0) { s.value = o.value; return o.value; } } return null;})()`);
  if (!picked) fail('no step with Risks');
  await type('#fork-value', 'FORKED');
  await click('#fork-btn');
  await until('the fork', `document.getElementById('run-id').textContent.indexOf(${JSON.stringify(completed.id + '.f')}) === 0`);
  await until('the fork succeeding', "document.getElementById('run-status').textContent === 'succeeded'");
  await sleep(300);
  const forked = await view();
  await shot('console-fork.png');

  // 4. A destructive tool's question, approved from the page.
  if (!await chooseProgram('w.ais')) fail('w.ais is not offered');
  await type('#args', '{"text": "from the page"}');
  await click('#start-btn');
  await until('the question about the tool', "!document.getElementById('confirm').hidden");
  const confirm = await evaluate("document.getElementById('confirm-question').textContent");
  await shot('console-confirm.png');
  await click('#approve');
  await until('the approved run succeeding', "document.getElementById('run-status').textContent === 'succeeded'");
  const approved = await view();

  process.stdout.write(JSON.stringify({ during, completed, paused, answered, forked, confirm, approved, errors }) + '\n');
  clearTimeout(timer);
  ws.close();
  proc.kill('SIGKILL');
  try { fs.rmSync(profile, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  process.exit(0);
}
