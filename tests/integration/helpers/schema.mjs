// Validation of the daemon's JSON against api/openapi.yaml. The schemas are compiled by Ajv's
// JSON Schema 2020-12 validator (the dialect of OpenAPI 3.1) in strict mode, so a typo in the
// document is an error rather than a silently ignored keyword.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';
import { openapiPath } from './env.mjs';

export const openapi = YAML.parse(fs.readFileSync(openapiPath, 'utf8'));

const DOC_ID = 'https://ember.invalid/openapi.yaml';

const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
// The whole document as one schema resource, so "#/components/schemas/X" references resolve as
// written. Only `components` is handed over: the rest of the document is not JSON Schema.
ajv.addVocabulary(['components']);
ajv.addSchema({ $id: DOC_ID, components: openapi.components }, DOC_ID);

function resolveRef(node) {
  let n = node;
  while (n && n.$ref) {
    assert.ok(n.$ref.startsWith('#/'), `only local references are supported: ${n.$ref}`);
    n = n.$ref
      .slice(2)
      .split('/')
      .reduce((obj, key) => obj?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], openapi);
    assert.ok(n, `unresolved reference ${node.$ref}`);
  }
  return n;
}

const compiled = new Map();
// A validator for the schema at a JSON pointer into the document ("/components/schemas/Error").
function validatorAt(pointer) {
  if (!compiled.has(pointer)) {
    const fn = ajv.getSchema(`${DOC_ID}#${pointer}`);
    assert.ok(fn, `no schema at ${pointer} in api/openapi.yaml`);
    compiled.set(pointer, fn);
  }
  return compiled.get(pointer);
}

function check(validate, value, what) {
  if (!validate(value)) {
    const errors = ajv.errorsText(validate.errors, { separator: '\n  ' });
    assert.fail(`${what} does not match api/openapi.yaml:\n  ${errors}\nvalue: ${JSON.stringify(value).slice(0, 2000)}`);
  }
}

// Validates `value` against components/schemas/<name>.
export function assertSchema(name, value) {
  assert.ok(openapi.components.schemas[name], `api/openapi.yaml has no schema ${name}`);
  check(validatorAt(`/components/schemas/${name}`), value, `${name}`);
}

function escapePointer(s) {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

// The document's description of one response: paths[template][method].responses[status], with
// the pointer of its media type `mediaType` (references into components/responses followed).
function responsePointer(method, template, status, mediaType) {
  const op = openapi.paths[template]?.[method.toLowerCase()];
  assert.ok(op, `api/openapi.yaml does not describe ${method} ${template}`);
  const responses = op.responses;
  let response = responses[String(status)];
  let pointer = `/paths/${escapePointer(template)}/${method.toLowerCase()}/responses/${status}`;
  assert.ok(response, `api/openapi.yaml describes no ${status} response for ${method} ${template}`);
  if (response.$ref) {
    pointer = response.$ref.slice(1);
    response = resolveRef(response);
  }
  assert.ok(response.content?.[mediaType], `api/openapi.yaml: ${method} ${template} ${status} has no ${mediaType} content`);
  return { response, pointer: `${pointer}/content/${escapePointer(mediaType)}` };
}

// Paths outside components are compiled on demand as their own little schema that references
// the document (Ajv only indexes schemas under known keywords).
function validatorForPointer(pointer, key) {
  if (!compiled.has(pointer)) {
    const node = pointer
      .slice(1)
      .split('/')
      .reduce((obj, k) => obj?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], openapi);
    assert.ok(node?.[key], `api/openapi.yaml has nothing at ${pointer}/${key}`);
    const schema = JSON.parse(
      JSON.stringify(node[key]).replace(/"#\/components\//g, `"${DOC_ID}#/components/`),
    );
    compiled.set(pointer, ajv.compile(schema));
  }
  return compiled.get(pointer);
}

// Checks a complete HTTP answer against the document: the status must be listed for the
// operation, the content type must be described, and a JSON body must match its schema.
// `template` is the documented path ("/v1/models/{id}").
export function assertResponse(method, template, res) {
  const type = (res.headers['content-type'] || '').split(';')[0].trim();
  const { response, pointer } = responsePointer(method, template, res.status, type);
  if (type === 'application/json') {
    assert.notEqual(res.json, undefined, `${method} ${template} ${res.status}: the body is not JSON: ${res.text}`);
    check(validatorForPointer(pointer, 'schema'), res.json, `${method} ${template} ${res.status} body`);
  }
  for (const [name, header] of Object.entries(response.headers || {})) {
    const h = resolveRef(header);
    if (h.required) assert.ok(res.headers[name.toLowerCase()] !== undefined, `${name} header missing`);
  }
}

// Checks one parsed SSE data payload of a streaming answer of `template` against its event schema.
export function assertStreamEvent(template, payload) {
  const { pointer } = responsePointer('post', template, 200, 'text/event-stream');
  check(validatorForPointer(pointer, 'x-ember-event-schema'), payload, `stream event of ${template}`);
}

// Every reference in the document, for the document test.
export function allRefs() {
  const refs = [];
  const walk = (n) => {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n && typeof n === 'object') {
      if (typeof n.$ref === 'string') refs.push(n.$ref);
      Object.values(n).forEach(walk);
    }
  };
  walk(openapi);
  return refs;
}

export { resolveRef };
