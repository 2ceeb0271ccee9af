// Starts the real `ember serve` on a free loopback port and stops it again. Every test file starts
// its own daemon(s) with the flags it needs, so files do not depend on each other's state.
import { after, before } from 'node:test';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { emberBinary, modelPath } from './env.mjs';
import { request } from './http.mjs';

const running = new Set();
// A failing test must not leave a daemon behind (the suite runs under ctest on shared machines).
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

// A port nobody listens on right now: bind port 0, read it, release it. Another process could
// take it before the daemon binds, so startDaemon retries with a new port when the bind fails.
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The daemon's environment: ours without EMBER_* settings (a developer's EMBER_API_KEY or
// EMBER_CONFIG must not change what the tests see), except the kernel choice.
function daemonEnvironment(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('EMBER_') || k === 'EMBER_KERNELS') env[k] = v;
  }
  return { ...env, ...extra };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Daemon {
  constructor(child, port, args) {
    this.child = child;
    this.port = port;
    this.args = args;
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.output = '';
    this.exit = null;
    const keep = (chunk) => {
      this.output += chunk.toString();
      if (this.output.length > 200_000) this.output = this.output.slice(-100_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        running.delete(child);
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
  }

  get pid() {
    return this.child.pid;
  }

  // Sends `signal` and waits for the exit; SIGKILL after `timeoutMs`. Returns {code, signal}.
  async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
    if (this.exit) return this.exit;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }

  describe() {
    return `ember serve ${this.args.join(' ')}\n--- daemon output ---\n${this.output.slice(-4000)}`;
  }
}

// Starts `ember serve -m stories260K.gguf -t 1 --port P ...args` and waits until GET /health is
// 200.
export async function startDaemon({ args = [], env = {}, model = modelPath, readyTimeoutMs = 20_000 } = {}) {
  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    // model null: no -m (a daemon that serves only --models-dir or the config's models).
    const fullArgs = ['serve', ...(model === null ? [] : ['-m', model]), '-t', '1', '--port', String(port), ...args];
    const child = spawn(emberBinary, fullArgs, { env: daemonEnvironment(env), stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    const daemon = new Daemon(child, port, fullArgs.slice(1));
    let spawnError = null;
    child.on('error', (e) => {
      spawnError = e;
    });
    const deadline = Date.now() + readyTimeoutMs;
    let ready = false;
    while (Date.now() < deadline && !daemon.exit) {
      if (spawnError) throw new Error(`cannot start ${emberBinary}: ${spawnError.message}`);
      try {
        const res = await request(daemon, { path: '/health', timeoutMs: 1000 });
        if (res.status === 200) {
          ready = true;
          break;
        }
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    if (ready) return daemon;
    if (daemon.exit) {
      lastError = new Error(`the daemon exited (${JSON.stringify(daemon.exit)}) before it was ready\n${daemon.describe()}`);
      // Only a lost race for the port is worth another try.
      if (!/address already in use|bind/i.test(daemon.output)) throw lastError;
      continue;
    }
    await daemon.stop('SIGKILL');
    throw new Error(`the daemon did not answer GET /health with 200 within ${readyTimeoutMs} ms\n${daemon.describe()}`);
  }
  throw lastError;
}

// The usual test file's setup: a daemon on the fixture model for the whole file and an `openai`
// client for it (no retries, so a failure shows at once). Registers the before/after hooks of
// node:test; returns an object whose `daemon` and `client` are set once `before` ran.
export function daemonWithClient(OpenAI, { timeout = 60_000, ...options } = {}) {
  const ctx = { daemon: null, client: null };
  before(async () => {
    ctx.daemon = await startDaemon(options);
    ctx.client = new OpenAI({ baseURL: `${ctx.daemon.baseUrl}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout });
  });
  after(async () => {
    await ctx.daemon?.stop();
  });
  return ctx;
}
