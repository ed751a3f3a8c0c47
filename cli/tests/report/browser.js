// Drives a headless Chromium over the DevTools protocol (the `ws` package,
// no browser download) to check a page `aisc report` / `aisc graph` wrote.
//
//   node browser.js PAGE.html [CLICK_SELECTOR] [SCREENSHOT.png]
//
// Prints one JSON line: {nodes, bars, errors, detail}. `detail` is the
// text of the #detail panel after a real mouse click on the first element
// matching CLICK_SELECTOR. Chromium comes from $AIS_CHROMIUM or PATH; the
// `ws` package from $AIS_NPM_DIR/node_modules.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const npmDir = process.env.AIS_NPM_DIR || path.join(__dirname, '..', '..', '..', 'target', 'npm');
const WebSocket = require(path.join(npmDir, 'node_modules', 'ws'));

const [page, clickSelector, shot] = process.argv.slice(2);
const chromium = process.env.AIS_CHROMIUM || 'chromium';
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ais-chromium-'));
const proc = spawn(chromium, [
  '--headless=new', '--remote-debugging-port=0', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--no-default-browser-check', '--disable-extensions',
  '--user-data-dir=' + profile, '--window-size=1500,1000', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe'] });

function fail(msg) {
  process.stderr.write('browser.js: ' + msg + '\n');
  try { proc.kill('SIGKILL'); } catch (_) { /* gone */ }
  process.exit(1);
}
const timer = setTimeout(() => fail('no answer from Chromium in 90 s'), 90000);
proc.on('error', (e) => fail('cannot start ' + chromium + ': ' + e.message));

let stderr = '';
proc.stderr.on('data', (d) => {
  stderr += d.toString();
  const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
  if (m && !started) { started = true; run(m[1]).catch((e) => fail(e.stack || String(e))); }
});
let started = false;

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
  await s('Page.navigate', { url: 'file://' + path.resolve(page) });
  await loaded;
  const evaluate = async (expr) => {
    const r = await s('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error('evaluate failed: ' + expr);
    return r.result.value;
  };
  const nodes = await evaluate("document.querySelectorAll('#graph .node').length");
  const bars = await evaluate("document.querySelectorAll('#timeline .bar').length");
  let detail = null;
  if (clickSelector) {
    const box = await evaluate(`(function(){var n=document.querySelector(${JSON.stringify(clickSelector)}); if(!n)return null; n.scrollIntoView({block:'center',inline:'center'}); var r=n.getBoundingClientRect(); return {x:r.left+r.width/2,y:r.top+r.height/2};})()`);
    if (!box) fail('nothing matches ' + clickSelector);
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
      await s('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
    }
    detail = await evaluate("document.getElementById('detail').textContent");
    await evaluate('window.scrollTo(0,0); document.querySelectorAll(".scroll").forEach(function(e){e.scrollTop=0;e.scrollLeft=0;}); 0');
  }
  if (shot) {
    const { data } = await s('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(shot, Buffer.from(data, 'base64'));
  }
  process.stdout.write(JSON.stringify({ nodes, bars, errors, detail }) + '\n');
  clearTimeout(timer);
  ws.close();
  proc.kill('SIGKILL');
  try { fs.rmSync(profile, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  process.exit(0);
}
