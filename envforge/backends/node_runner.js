// envforge's side of a JavaScript reference: node runs this file, which loads the reference
// module and serves batched calls from envforge/backends/node.py.
//
// Frames, both ways: uint32 LE total length, uint32 LE header length, a JSON header, then a
// binary payload of typed arrays (each padded to 8 bytes). Requests come on stdin; replies go
// to the file descriptor given as argv[3], so that a reference writing to stdout (console.log)
// cannot corrupt the protocol (its stdout is the stderr log).
"use strict";

const fs = require("fs");
const path = require("path");

const referencePath = path.resolve(process.argv[2]);
const replyFd = Number(process.argv[3]);
console.log = console.info = console.debug = console.error;

const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  uint32: Uint32Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

function readExactly(n) {
  const buf = Buffer.allocUnsafe(n);
  let got = 0;
  while (got < n) {
    let read;
    try {
      read = fs.readSync(0, buf, got, n - got, null);
    } catch (e) {
      if (e.code === "EAGAIN") {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
        continue;
      }
      if (e.code === "EOF") return null;
      throw e;
    }
    if (read === 0) return null; // envforge closed the pipe
    got += read;
  }
  return buf;
}

function readFrame() {
  const head = readExactly(8);
  if (head === null) return null;
  const total = head.readUInt32LE(0);
  const headerLen = head.readUInt32LE(4);
  const body = readExactly(total - 8);
  if (body === null) return null;
  const header = JSON.parse(body.subarray(0, headerLen).toString("utf8"));
  const payload = body.subarray(headerLen);
  return { header, payload };
}

const pad8 = (n) => (n + 7) & ~7;

function writeFrame(header, arrays) {
  const headerBytes = Buffer.from(JSON.stringify(header), "utf8");
  const start = pad8(8 + headerBytes.length);
  let size = start;
  for (const a of arrays) size += pad8(a.byteLength);
  const out = Buffer.alloc(size);
  out.writeUInt32LE(size, 0);
  out.writeUInt32LE(start - 8, 4); // the header, padded with spaces up to the payload
  out.fill(0x20, 8, start);
  headerBytes.copy(out, 8);
  let at = start;
  for (const a of arrays) {
    Buffer.from(a.buffer, a.byteOffset, a.byteLength).copy(out, at);
    at += pad8(a.byteLength);
  }
  let sent = 0;
  while (sent < size) sent += fs.writeSync(replyFd, out, sent, size - sent);
}

// ---- the declared mapping: canonical field <-> a path in the reference's objects ---------

// "sides[*].team[*].hp" -> ["sides", "*", "team", "*", "hp"]
function tokens(mapping) {
  const out = [];
  for (const part of mapping.split(".")) {
    const m = /^([A-Za-z_$][\w$]*)((?:\[(?:\*|\d+)\])*)$/.exec(part);
    if (m === null) throw new Error(`cannot parse mapping ${JSON.stringify(mapping)}`);
    out.push(m[1]);
    for (const index of m[2].match(/\[(\*|\d+)\]/g) || []) out.push(index.slice(1, -1));
  }
  return out;
}

// JS source of nested loops over a field's elements: `visit` is the statement for one element,
// with `ref` the expression of its place in the object
function loops(field, visit) {
  const toks = tokens(field.path);
  const stars = toks.filter((t) => t === "*").length;
  if (stars !== field.shape.length) {
    throw new Error(
      `field ${field.name}: mapping ${field.path} has ${stars} [*] but the field has ${field.shape.length} dimension(s)`
    );
  }
  let code = "";
  let expr = "b";
  let depth = 0;
  let close = "";
  for (const t of toks) {
    if (t === "*") {
      const v = `i${depth}`;
      code += `for (let ${v} = 0; ${v} < ${field.shape[depth]}; ${v}++) {\n`;
      expr += `[${v}]`;
      depth += 1;
      close += "}";
    } else if (/^\d+$/.test(t)) expr += `[${t}]`;
    else expr += `.${t}`;
  }
  return `${code}${visit(expr)}\n${close}`;
}

function compileMapping(fields) {
  const readers = [];
  const writers = [];
  for (const f of fields) {
    const check =
      `if (typeof v !== "number" && typeof v !== "boolean") throw new MappingError(` +
      `${JSON.stringify(`field ${f.name} (${f.path}) is not a number: got `)} + String(v));`;
    const read = loops(f, (e) => `{ const v = ${e}; ${check} arr[at++] = v; }`);
    const value = f.dtype === "bool" ? "arr[at++] !== 0" : "arr[at++]";
    const write = loops(f, (e) => `${e} = ${value};`);
    readers.push(new Function("MappingError", "b", "arr", "at", `${read}\nreturn at;`));
    writers.push(new Function("b", "arr", "at", `${write}\nreturn at;`));
  }
  return { readers, writers };
}

class MappingError extends Error {}

// ---- serving ---------------------------------------------------------------------------

let reference = null;
let current = -1; // the env of the batch being worked on, named when the reference throws
let fields = [];
let mapping = null;
let obsSize = 0;

function fieldArrays(n) {
  return fields.map((f) => new ARRAYS[f.dtype](n * f.size));
}

function readState(battles) {
  const arrays = fieldArrays(battles.length);
  fields.forEach((f, j) => {
    let at = 0;
    for (const b of battles) {
      try {
        at = mapping.readers[j](MappingError, b, arrays[j], at);
      } catch (e) {
        if (e instanceof MappingError) throw e;
        throw new MappingError(`field ${f.name}: the path ${f.path} is not in the reference's object (${e.message})`);
      }
    }
  });
  return arrays;
}

function parseState(payload, n) {
  const arrays = [];
  let at = 0;
  for (const f of fields) {
    const Arr = ARRAYS[f.dtype];
    const bytes = n * f.size * Arr.BYTES_PER_ELEMENT;
    const copy = new Uint8Array(bytes);
    copy.set(payload.subarray(at, at + bytes));
    arrays.push(new Arr(copy.buffer));
    at += pad8(bytes);
  }
  return { arrays, at };
}

// fresh objects from reset(0), with the given state written in (pure from envforge's view)
function objectsOf(arrays, n) {
  const out = [];
  const offsets = fields.map(() => 0);
  for (let i = 0; i < n; i++) {
    current = i;
    const b = reference.reset(0);
    fields.forEach((f, j) => {
      try {
        offsets[j] = mapping.writers[j](b, arrays[j], offsets[j]);
      } catch (e) {
        throw new MappingError(`field ${f.name}: cannot write ${f.path} into the object reset returned (${e.message})`);
      }
    });
    out.push(b);
  }
  return out;
}

function observeAll(battles) {
  const obs = new Float32Array(battles.length * obsSize);
  battles.forEach((b, i) => {
    current = i;
    const view = obs.subarray(i * obsSize, (i + 1) * obsSize);
    const got = reference.observe(b, view);
    if (got !== undefined && got !== view) view.set(got);
  });
  return obs;
}

const handlers = {
  init(header) {
    fields = header.fields.map((f) => ({ ...f, size: f.shape.reduce((a, b) => a * b, 1) }));
    obsSize = header.obs_size;
    reference = require(referencePath);
    for (const name of ["reset", "step", "observe"]) {
      if (typeof reference[name] !== "function") {
        throw new MappingError(`${path.basename(referencePath)} does not export a function ${name}`);
      }
    }
    mapping = compileMapping(fields);
    readState([reference.reset(0)]); // every path exists on a reset object
    return [{}, []];
  },
  reset(header, payload) {
    const seeds = new Uint32Array(header.n);
    new Uint8Array(seeds.buffer).set(payload.subarray(0, 4 * header.n));
    const battles = [];
    for (let i = 0; i < header.n; i++) {
      current = i;
      battles.push(reference.reset(seeds[i]));
    }
    return [{}, readState(battles)];
  },
  step(header, payload) {
    const n = header.n;
    const { arrays, at } = parseState(payload, n);
    const actions = new Int32Array(n);
    new Uint8Array(actions.buffer).set(payload.subarray(at, at + 4 * n));
    const battles = objectsOf(arrays, n);
    const reward = new Float64Array(n);
    const terminated = new Uint8Array(n);
    const truncated = new Uint8Array(n);
    battles.forEach((b, i) => {
      current = i;
      const r = reference.step(b, actions[i]);
      if (r === null || typeof r !== "object") throw new MappingError("step must return {reward, terminated, truncated}");
      reward[i] = r.reward;
      terminated[i] = r.terminated ? 1 : 0;
      truncated[i] = r.truncated ? 1 : 0;
    });
    return [{}, [...readState(battles), observeAll(battles), reward, terminated, truncated]];
  },
  // the reference's own words for each env's state and action (its optional export explain)
  explain(header, payload) {
    if (typeof reference.explain !== "function") return [{ texts: null }, []];
    const { arrays, at } = parseState(payload, header.n);
    const actions = new Int32Array(header.n);
    new Uint8Array(actions.buffer).set(payload.subarray(at, at + 4 * header.n));
    const texts = objectsOf(arrays, header.n).map((b, i) => String(reference.explain(b, actions[i])));
    return [{ texts }, []];
  },
  observe(header, payload) {
    const { arrays } = parseState(payload, header.n);
    return [{}, [observeAll(objectsOf(arrays, header.n))]];
  },
};

for (;;) {
  const frame = readFrame();
  if (frame === null) break;
  const { header, payload } = frame;
  if (header.op === "close") break;
  current = -1;
  let reply;
  try {
    reply = handlers[header.op](header, payload);
  } catch (e) {
    const error = e instanceof Error ? e : new Error(String(e));
    writeFrame(
      {
        error: error.message,
        name: e instanceof MappingError ? "MappingError" : error.name,
        stack: String(error.stack || ""),
        env: current,
      },
      []
    );
    continue;
  }
  writeFrame(reply[0], reply[1]);
}
