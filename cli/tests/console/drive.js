// Drives `aisc serve`'s console (GET /console) in a headless Chromium over
// the DevTools protocol (the `ws` package; no browser download), as a
// person would: start a run and watch it end, start a run that pauses,
// type the answer and press Answer, watch it end.
//
//   node drive.js BASE_URL SHOT_DIR
//
// Prints one JSON line: what the page showed at each step, and every
// console error or exception. The browser: ../support/chromium.js.
'use strict';
const path = require('path');
const { openPage, sleep } = require('../support/chromium');

const [base, shots] = process.argv.slice(2);

async function main() {
  const p = await openPage({
    name: 'drive.js',
    url: base + '/console',
    timeoutMs: 120000,
    late: 'the console did not get there in 120 s',
  });
  const { s, evaluate, click, errors, fail } = p;
  const until = async (what, expr) => {
    for (let i = 0; i < 600; i++) {
      const v = await evaluate(expr);
      if (v) return v;
      await sleep(100);
    }
    fail('the page never showed ' + what + '; errors: ' + JSON.stringify(errors));
    return null;
  };
  const type = async (selector, text) => {
    await evaluate(`(function(){var n=document.querySelector(${JSON.stringify(selector)}); n.focus(); n.select && n.select(); return 0;})()`);
    await s('Input.insertText', { text });
  };
  const shot = async (name) => {
    if (!shots) return;
    await evaluate('window.scrollTo(0,0); 0');
    await p.screenshot(path.join(shots, name));
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

  p.finish({ during, completed, paused, answered, forked, confirm, approved, errors });
}
main().catch((e) => { process.stderr.write('drive.js: ' + (e.stack || e) + '\n'); process.exit(1); });
