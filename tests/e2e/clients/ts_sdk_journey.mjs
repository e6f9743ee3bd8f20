// The official TypeScript SDK as an application uses it: Client + StreamableHTTPClientTransport
// with an OAuthClientProvider that configures NO scope, so the SDK picks what the server's 401
// challenge names. The person's part (log-in, consent) is played by the Python test: this script
// prints {"authorize": url} and reads the callback URL back on stdin.
//
//   node ts_sdk_journey.mjs <node_modules folder> <MCP URL>
//
// Prints one JSON line per step; exits non-zero on any failure.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import readline from 'node:readline';

const [nodeModules, mcpUrl] = process.argv.slice(2);
const require = createRequire(join(nodeModules, 'resolve-from-here.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { UnauthorizedError } = require('@modelcontextprotocol/sdk/client/auth.js');

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);

class InMemoryProvider {
  constructor() {
    this.callbackUrl = undefined;
  }
  get redirectUrl() {
    return 'http://127.0.0.1:33418/callback';
  }
  get clientMetadata() {
    return {
      client_name: 'TypeScript SDK test client',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.client; }
  saveClientInformation(client) { this.client = client; }
  tokens() { return this.savedTokens; }
  saveTokens(tokens) { this.savedTokens = tokens; }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    say({ authorize: url.href });
    this.callbackUrl = (await lines.next()).value;
  }
}

const provider = new InMemoryProvider();
const url = new URL(mcpUrl);
const connect = async () => {
  const client = new Client({ name: 'threengram-ts-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
};

let session;
try {
  session = await connect();
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await transport.finishAuth(new URL(provider.callbackUrl).searchParams.get('code'));
  session = await connect();
}
const { client } = session;
say({ step: 'connected', scope: provider.savedTokens.scope, protocol: session.transport.protocolVersion });

const remembered = await client.callTool({
  name: 'remember',
  arguments: { memoryType: 'decision', topic: 'ts sdk', content: 'Ship the TypeScript journey' },
});
say({ step: 'remember', isError: remembered.isError ?? false, result: remembered.structuredContent });

const found = await client.callTool({ name: 'search', arguments: { query: 'TypeScript journey' } });
say({ step: 'search', isError: found.isError ?? false, result: found.structuredContent });

const read = await client.readResource({ uri: remembered.structuredContent.memory.uri });
say({ step: 'readResource', contents: read.contents });

const prompt = await client.getPrompt({ name: 'briefing', arguments: {} });
say({ step: 'getPrompt', messages: prompt.messages });

await client.close();
say({ step: 'done' });
process.exit(0);
