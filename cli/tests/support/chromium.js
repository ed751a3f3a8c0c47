// One headless Chromium page over the DevTools protocol (the `ws` package,
// no browser download), shared by the browser tests' drivers
// (report/browser.js, console/drive.js).
//
// Chromium comes from $AIS_CHROMIUM or PATH; `ws` from
// $AIS_NPM_DIR/node_modules. A driver calls `openPage(...)` once; the page
// collects every console error, exception and error log line in `errors`.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const npmDir = process.env.AIS_NPM_DIR || path.join(__dirname, '..', '..', '..', 'target', 'npm');
const WebSocket = require(path.join(npmDir, 'node_modules', 'ws'));

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// Starts Chromium and opens `url` in a 1500x1000 page. `name` prefixes every
// failure message; the whole driver fails after `timeoutMs` with `late`.
// Resolves to the page's helpers; every failure exits the process with 1.
function openPage({ name, url, timeoutMs, late }) {
  const chromium = process.env.AIS_CHROMIUM || 'chromium';
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ais-chromium-'));
  const proc = spawn(chromium, [
    '--headless=new', '--remote-debugging-port=0', '--no-sandbox', '--disable-gpu',
    '--no-first-run', '--no-default-browser-check', '--disable-extensions',
    '--user-data-dir=' + profile, '--window-size=1500,1000', 'about:blank',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });

  const fail = (msg) => {
    process.stderr.write(name + ': ' + msg + '\n');
    try { proc.kill('SIGKILL'); } catch (_) { /* gone */ }
    process.exit(1);
  };
  const timer = setTimeout(() => fail(late), timeoutMs);
  proc.on('error', (e) => fail('cannot start ' + chromium + ': ' + e.message));

  return new Promise((resolve) => {
    let stderr = '';
    let started = false;
    proc.stderr.on('data', (d) => {
      stderr += d.toString();
      const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m && !started) {
        started = true;
        attach(m[1]).then(resolve).catch((e) => fail(e.stack || String(e)));
      }
    });
  });

  async function attach(devtools) {
    const ws = new WebSocket(devtools, { perMessageDeflate: false });
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
    await s('Page.navigate', { url });
    await loaded;

    const evaluate = async (expr) => {
      const r = await s('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
      if (r.exceptionDetails) throw new Error('evaluate failed: ' + expr + ': ' + JSON.stringify(r.exceptionDetails));
      return r.result.value;
    };
    // A real mouse click in the middle of the first element matching `selector`.
    const click = async (selector) => {
      const box = await evaluate(`(function(){var n=document.querySelector(${JSON.stringify(selector)}); if(!n)return null; n.scrollIntoView({block:'center',inline:'center'}); var r=n.getBoundingClientRect(); return {x:r.left+r.width/2,y:r.top+r.height/2};})()`);
      if (!box) fail('nothing matches ' + selector);
      for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
        await s('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
      }
    };
    const screenshot = async (file) => {
      const { data } = await s('Page.captureScreenshot', { format: 'png' });
      fs.writeFileSync(file, Buffer.from(data, 'base64'));
    };
    // Prints the driver's one JSON line and ends everything it started.
    const finish = (result) => {
      process.stdout.write(JSON.stringify(result) + '\n');
      clearTimeout(timer);
      ws.close();
      proc.kill('SIGKILL');
      try { fs.rmSync(profile, { recursive: true, force: true }); } catch (_) { /* best effort */ }
      process.exit(0);
    };
    return { s, evaluate, click, screenshot, errors, fail, finish };
  }
}

module.exports = { openPage, sleep };
