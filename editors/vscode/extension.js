// VS Code client for the AIS language server: starts `aisc lsp` over stdio
// (the executable and its arguments come from the `ais.server.*` settings).
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function createClient() {
  const config = vscode.workspace.getConfiguration('ais');
  const command = config.get('server.path', 'aisc');
  const args = ['lsp', ...config.get('server.extraArgs', [])];
  const serverOptions = {
    run: { command, args, transport: TransportKind.stdio },
    debug: { command, args, transport: TransportKind.stdio },
  };
  const clientOptions = {
    documentSelector: [{ scheme: 'file', language: 'ais' }, { scheme: 'untitled', language: 'ais' }],
    synchronize: { configurationSection: 'ais' },
  };
  return new LanguageClient('ais', 'AIS language server', serverOptions, clientOptions);
}

async function activate(context) {
  client = createClient();
  context.subscriptions.push(
    vscode.commands.registerCommand('ais.restartServer', async () => {
      if (client) {
        await client.stop();
      }
      client = createClient();
      await client.start();
    }),
  );
  await client.start();
}

async function deactivate() {
  if (client) {
    await client.stop();
  }
}

module.exports = { activate, deactivate };
