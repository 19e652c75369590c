// worker.nixDaemon.maxConnections with real Nix: every Nix command the worker runs, the build step
// included, holds one store connection while it runs; past the bound the next command waits until
// one ends. A FIFO keeps a command (or a builder) running for exactly as long as the test wants.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.js';
import { runCommand } from '../../worker/childProcess.js';
import { nix, NIX_FEATURE_ARGS } from '../../worker/nixCli.js';
import { realiseDerivation } from '../../worker/nixBuild.js';
import { workerSettings } from '../../worker/settings.js';
import { StoreConnections, storeConnections } from '../../worker/storeConnections.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = mkdtempSync(join(tmpdir(), 'kiln-store-connections-'));
t.teardown(() => {
  storeConnections.setLimit(1 * 9 + 16);
  rmSync(dir, { recursive: true, force: true });
});

const fifo = (name: string): string => {
  const path = join(dir, name);
  execFileSync('mkfifo', [path]);
  return path;
};

/** Settles with true when `promise` has settled, false otherwise, without waiting for it. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  const marker = Symbol('pending');
  return (await Promise.race([promise.then(() => true, () => true), Promise.resolve(marker)])) !== marker;
}

/** A command outside the bound that takes as long as the waiting one would: it would have ended by now. */
const unboundedEval = () => runCommand('nix', [...NIX_FEATURE_ARGS, 'eval', '--expr', '1 + 1'], { env });

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

t.test('the bound orders waiters and follows a new limit', async (t) => {
  const connections = new StoreConnections(1);
  const order: string[] = [];
  const release: (() => void)[] = [];
  const held = (name: string) => connections.hold(() => new Promise<void>((resolve) => {
    order.push(name);
    release.push(resolve);
  }));
  const all = [held('a'), held('b'), held('c')];
  await until(() => order.length === 1);
  t.same([connections.inUse, connections.queued], [1, 2]);
  connections.setLimit(2);
  await until(() => order.length === 2);
  t.same(order, ['a', 'b'], 'a larger limit lets the first waiter in at once');
  connections.setLimit(1);
  release.shift()!();
  await new Promise((resolve) => setImmediate(resolve));
  t.same([order.length, connections.inUse, connections.queued], [2, 1, 1], 'after shrinking, an ending command frees its place instead of passing it on');
  release.shift()!();
  await until(() => order.length === 3);
  release.shift()!();
  await Promise.all(all);
  t.same([connections.inUse, connections.queued], [0, 0]);
  t.throws(() => new StoreConnections(0), /positive integer/);
});

t.test('past the bound a Nix command waits for a running one to end', async (t) => {
  storeConnections.setLimit(1);
  const gate = fifo('eval-gate');
  const blocked = nix(['eval', '--impure', '--expr', `builtins.readFile ${gate}`], { env });
  await until(() => storeConnections.inUse === 1);
  const waiting = nix(['eval', '--expr', '1 + 1'], { env });
  t.equal((await unboundedEval()).exitCode, 0);
  t.equal(storeConnections.queued, 1, 'the second command is in line');
  t.notOk(await settled(waiting), 'and has not run while the first holds the only connection');
  writeFileSync(gate, 'open\n');
  t.equal((await blocked).stdout.trim(), '"open\\n"');
  t.equal((await waiting).stdout.trim(), '2', 'it runs once the first one ends');
  t.same([storeConnections.inUse, storeConnections.queued], [0, 0]);
});

t.test('a running build step holds a connection', async (t) => {
  storeConnections.setLimit(1);
  const gate = fifo('build-gate');
  const started = join(dir, 'build-started');
  const drvPath = execFileSync('nix-instantiate', ['--expr',
    `derivation { name = "kiln-store-connection"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > ${started}; read line < ${gate}; echo $line > $out" ]; nonce = "${randomUUID()}"; }`,
  ], { env, encoding: 'utf8' }).trim();
  const building = realiseDerivation({
    drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, substituters: [], netrcFile: null, gcRoot: null, fetchStoredLog: false, env, onLog: () => undefined,
  });
  await until(() => existsSync(started));
  const waiting = nix(['eval', '--expr', '1 + 1'], { env });
  t.equal((await unboundedEval()).exitCode, 0);
  t.equal(storeConnections.queued, 1, 'a command waits while the builder runs');
  t.notOk(await settled(waiting));
  writeFileSync(gate, 'built\n');
  const realised = await building;
  t.ok(realised.ok, 'the build succeeds');
  t.equal((await waiting).stdout.trim(), '2');
});

t.test('the option reaches the worker, with its derived default', async (t) => {
  const derived = workerSettings(loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.build.maxConcurrent': 3 } }).values);
  t.equal(derived.storeConnections, 3 * 9 + 16, 'each build slot: one connection plus 8 for imports, and 16 more');
  t.equal(workerSettings(loadConfig({ scope: 'worker', env: {}, overrides: { 'worker.nixDaemon.maxConnections': 5 } }).values).storeConnections, 5);
});
