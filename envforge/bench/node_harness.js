// envforge bench: a JavaScript reference stepped in a plain node loop over a batch of objects.
// Per step each env's action comes from xorshift32 (random) or a small MLP on its observation;
// the env is stepped, reset when its episode ends, and observed: the work a batched port does.
// usage: node node_harness.js REFERENCE BATCH MIN_RUN_S POLICY_JSON
//   -> one line: "<env steps> <wall seconds> <cpu seconds>"
"use strict";
const fs = require("fs");
const path = require("path");

const reference = require(path.resolve(process.argv[2]));
const n = Number(process.argv[3]);
const minRun = Number(process.argv[4]);
const policy = JSON.parse(fs.readFileSync(process.argv[5], "utf8"));
const { obs_size: obsSize, n_actions: nActions, use_mlp: useMlp, hidden } = policy;
const w1 = Float32Array.from(policy.w1); // [obsSize * hidden], row-major
const w2 = Float32Array.from(policy.w2); // [hidden * nActions]

const envs = [];
const rng = new Uint32Array(n);
const obs = new Float32Array(n * obsSize);
const h = new Float32Array(hidden);
let checksum = 0;

function next(i) {
  let x = rng[i];
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  rng[i] = x;
  return rng[i];
}

function mlpAction(o) {
  for (let j = 0; j < hidden; j++) {
    let s = 0;
    for (let k = 0; k < obsSize; k++) s += o[k] * w1[k * hidden + j];
    h[j] = Math.tanh(s);
  }
  let best = 0;
  let bestValue = -Infinity;
  for (let a = 0; a < nActions; a++) {
    let s = 0;
    for (let j = 0; j < hidden; j++) s += h[j] * w2[j * nActions + a];
    if (s > bestValue) {
      bestValue = s;
      best = a;
    }
  }
  return best;
}

for (let i = 0; i < n; i++) {
  rng[i] = (Math.imul(i, 2654435761) ^ 0x9e3779b9) >>> 0 || 1;
  envs.push(reference.reset(i >>> 0));
  reference.observe(envs[i], obs.subarray(i * obsSize, (i + 1) * obsSize));
}

function run(steps) {
  for (let t = 0; t < steps; t++) {
    for (let i = 0; i < n; i++) {
      const view = obs.subarray(i * obsSize, (i + 1) * obsSize);
      const action = useMlp ? mlpAction(view) : next(i) % nActions;
      const r = reference.step(envs[i], action);
      checksum += r.reward;
      if (r.terminated || r.truncated) envs[i] = reference.reset(next(i));
      reference.observe(envs[i], view);
    }
  }
}

const now = () => Number(process.hrtime.bigint()) / 1e9;
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
let steps = 1; // calibrate: double until one run lasts minRun
for (;;) {
  const t0 = now();
  run(steps);
  if (now() - t0 >= minRun || steps >= 2 ** 30) break;
  steps *= 2;
}
const t0 = now();
const c0 = cpu();
run(steps);
process.stdout.write(`${steps * n} ${(now() - t0).toFixed(9)} ${(cpu() - c0).toFixed(9)}\n`);
process.stderr.write(`checksum ${checksum}\n`);
