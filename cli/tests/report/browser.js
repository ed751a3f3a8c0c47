// Checks a page `aisc report` / `aisc graph` wrote, in a headless Chromium
// (../support/chromium.js).
//
//   node browser.js PAGE.html [CLICK_SELECTOR] [SCREENSHOT.png]
//
// Prints one JSON line: {nodes, bars, errors, detail}. `detail` is the
// text of the #detail panel after a real mouse click on the first element
// matching CLICK_SELECTOR.
'use strict';
const path = require('path');
const { openPage } = require('../support/chromium');

const [page, clickSelector, shot] = process.argv.slice(2);

async function main() {
  const p = await openPage({
    name: 'browser.js',
    url: 'file://' + path.resolve(page),
    timeoutMs: 90000,
    late: 'no answer from Chromium in 90 s',
  });
  const nodes = await p.evaluate("document.querySelectorAll('#graph .node').length");
  const bars = await p.evaluate("document.querySelectorAll('#timeline .bar').length");
  let detail = null;
  if (clickSelector) {
    await p.click(clickSelector);
    detail = await p.evaluate("document.getElementById('detail').textContent");
    await p.evaluate('window.scrollTo(0,0); document.querySelectorAll(".scroll").forEach(function(e){e.scrollTop=0;e.scrollLeft=0;}); 0');
  }
  if (shot) await p.screenshot(shot);
  p.finish({ nodes, bars, errors: p.errors, detail });
}
main().catch((e) => { process.stderr.write('browser.js: ' + (e.stack || e) + '\n'); process.exit(1); });
