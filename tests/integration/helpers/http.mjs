// Plain node:http requests and a server-sent-events reader. No HTTP client library on purpose: the
// tests must see exactly what the daemon sends (status, headers, comment lines, chunk boundaries).
import http from 'node:http';

// `target` is a daemon ({port}) or {socketPath}. Options: method, path, headers, json (serialized
// as the body), body (string or Buffer, sent as is), agent, timeoutMs.
function requestOptions(target, { method = 'GET', path = '/', headers = {}, json, body, agent }) {
  const h = { ...headers };
  let payload = body;
  if (json !== undefined) {
    payload = JSON.stringify(json);
    if (!Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
  }
  const options = { method, path, headers: h };
  if (agent) options.agent = agent;
  if (target.socketPath) {
    options.socketPath = target.socketPath;
    if (!Object.keys(h).some((k) => k.toLowerCase() === 'host')) h.Host = 'localhost';
  } else {
    options.host = '127.0.0.1';
    options.port = target.port;
  }
  return { options, payload };
}

function parseJson(res, text) {
  if (!/application\/json/.test(res.headers['content-type'] || '')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// One request, body read completely. Resolves {status, headers, text, json} (json when the
// content type says JSON and it parses).
export function request(target, opts = {}) {
  const { options, payload } = requestOptions(target, opts);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const req = http.request(options, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode, headers: res.headers, text, json: parseJson(res, text) });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${options.method} ${options.path}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

// One SSE event block (the lines up to a blank line): its comment lines and its data.
function parseEventBlock(block) {
  const comments = [];
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) comments.push(line.slice(1).trim());
    else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  const event = { raw: block, comments, data: data.length ? data.join('\n') : null };
  if (event.data !== null && event.data !== '[DONE]') {
    try {
      event.json = JSON.parse(event.data);
    } catch {
      event.json = undefined;
    }
  }
  return event;
}

// Opens a streaming request. Resolves once the response head arrived, with {status, headers,
// events(), destroy()} for a 200 text/event-stream, or {status, headers, text, json} otherwise.
// events() is an async iterator of {raw, comments, data, json}; `data` is '[DONE]' for the end.
export function openStream(target, opts = {}) {
  const { options, payload } = requestOptions(target, { method: 'POST', ...opts });
  const timeoutMs = opts.timeoutMs ?? 60_000;
  return new Promise((resolve, reject) => {
    const req = http.request(options, (res) => {
      const type = res.headers['content-type'] || '';
      if (!/text\/event-stream/.test(type)) {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode, headers: res.headers, text, json: parseJson(res, text) });
        });
        res.on('error', reject);
        return;
      }
      const stream = {
        status: res.statusCode,
        headers: res.headers,
        localPort: res.socket?.localPort,
        // true once the response ended normally (the chunked body's last chunk arrived)
        complete: false,
        destroy: () => {
          req.destroy();
          res.destroy();
        },
        async *events() {
          let buffer = '';
          res.setEncoding('utf8');
          res.on('end', () => {
            stream.complete = true;
          });
          for await (const chunk of res) {
            buffer += chunk.replace(/\r\n/g, '\n');
            let end;
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const block = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              yield parseEventBlock(block);
            }
          }
          stream.complete = res.complete;
          if (buffer.trim()) yield { ...parseEventBlock(buffer), unterminated: true };
        },
      };
      resolve(stream);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${options.method} ${options.path}: stream idle for ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

// Reads a whole stream. Resolves {status, headers, events (data events only), comments, complete,
// localPort}
// or, for a non-stream answer, what openStream gave.
export async function collectStream(target, opts) {
  const s = await openStream(target, opts);
  if (!s.events) return s;
  const events = [];
  const comments = [];
  for await (const e of s.events()) {
    comments.push(...e.comments);
    if (e.data !== null) events.push(e);
  }
  return { status: s.status, headers: s.headers, events, comments, complete: s.complete, localPort: s.localPort };
}

// The generated text of a list of parsed chunks (chat deltas or completion texts).
export function streamedText(events) {
  let text = '';
  for (const e of events) {
    const choice = e.json?.choices?.[0];
    if (!choice) continue;
    text += choice.delta ? (choice.delta.content ?? '') : (choice.text ?? '');
  }
  return text;
}
