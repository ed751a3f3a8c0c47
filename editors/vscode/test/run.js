// Tokenizes every test/cases/*.ais with the extension's TextMate grammar
// (vscode-textmate + vscode-oniguruma, the engine VS Code uses) and compares
// the tokens with test/golden/NAME.tokens; AIS_BLESS=1 rewrites the goldens.
// Also checks that every .ais file named on the command line (the examples)
// ends with no rule left open, so no begin/end rule runs away.
//
// Modules come from NODE_PATH (cli/tests/editors.rs points it at
// $AIS_NPM_DIR/node_modules). Exits 1 on any difference.
'use strict';

const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const here = __dirname;
const grammarPath = path.join(here, '..', 'syntaxes', 'ais.tmLanguage.json');
const bless = process.env.AIS_BLESS === '1';

async function loadGrammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== 'source.ais') return null;
      return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath);
    },
  });
  return registry.loadGrammar('source.ais');
}

/** One line per token: its text (JSON-quoted) and its scopes but the root. */
function render(grammar, text) {
  const out = [];
  let stack = vsctm.INITIAL;
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    out.push(`> ${line}`);
    const r = grammar.tokenizeLine(line, stack);
    for (const t of r.tokens) {
      const piece = line.slice(t.startIndex, t.endIndex);
      if (piece.trim() === '') continue;
      out.push(`  ${JSON.stringify(piece)}: ${t.scopes.slice(1).join(' ')}`);
    }
    stack = r.ruleStack;
  }
  return { text: out.join('\n') + '\n', depth: stack.depth };
}

/** The language configuration's patterns are JavaScript regular expressions
 * that VS Code compiles; a bad one would only show up in the editor. */
function checkLanguageConfiguration() {
  const config = JSON.parse(fs.readFileSync(path.join(here, '..', 'language-configuration.json'), 'utf8'));
  const patterns = [
    config.wordPattern,
    config.indentationRules.increaseIndentPattern,
    config.indentationRules.decreaseIndentPattern,
    config.folding.markers.start,
    config.folding.markers.end,
    ...config.onEnterRules.map((r) => r.beforeText),
  ];
  for (const p of patterns) new RegExp(p);
  const increase = new RegExp(config.indentationRules.increaseIndentPattern);
  const decrease = new RegExp(config.indentationRules.decreaseIndentPattern);
  if (!increase.test('    flow main() -> str {') || increase.test('    let x = f(y)')) {
    throw new Error('increaseIndentPattern does not match an opening line only');
  }
  if (!decrease.test('    }') || decrease.test('    let x = 1')) {
    throw new Error('decreaseIndentPattern does not match a closing line only');
  }
}

async function main() {
  checkLanguageConfiguration();
  const grammar = await loadGrammar();
  if (!grammar) throw new Error('the grammar did not load');
  let failed = 0;
  let passed = 0;
  const casesDir = path.join(here, 'cases');
  const goldenDir = path.join(here, 'golden');
  const cases = fs.readdirSync(casesDir).filter((f) => f.endsWith('.ais')).sort();
  if (cases.length === 0) throw new Error(`no cases in ${casesDir}`);
  for (const name of cases) {
    const { text } = render(grammar, fs.readFileSync(path.join(casesDir, name), 'utf8'));
    const golden = path.join(goldenDir, name.replace(/\.ais$/, '.tokens'));
    if (bless) {
      fs.mkdirSync(goldenDir, { recursive: true });
      fs.writeFileSync(golden, text);
      passed++;
      continue;
    }
    const want = fs.existsSync(golden) ? fs.readFileSync(golden, 'utf8') : null;
    if (want === text) {
      passed++;
      continue;
    }
    failed++;
    console.error(`FAIL ${name}: tokens differ from ${path.relative(process.cwd(), golden)}`);
    if (want === null) {
      console.error('  (no golden file; run with AIS_BLESS=1)');
    } else {
      const a = want.split('\n');
      const b = text.split('\n');
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        if (a[i] !== b[i]) {
          console.error(`  line ${i + 1}:\n    want ${a[i]}\n    got  ${b[i]}`);
          break;
        }
      }
    }
  }
  const rootDepth = vsctm.INITIAL.depth;
  for (const file of process.argv.slice(2)) {
    const { depth } = render(grammar, fs.readFileSync(file, 'utf8'));
    if (depth === rootDepth) {
      passed++;
    } else {
      failed++;
      console.error(`FAIL ${file}: ends inside a rule (stack depth ${depth}, want ${rootDepth})`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(2);
});
