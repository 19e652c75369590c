// `nix copy` of a closure of about 200 small store paths over SSH (issue 24's goal): kiln's SSH
// server (`ssh-ng://bench@kiln`) against a real `nix-daemon --stdio` behind OpenSSH's sshd on the
// same loopback, same client options. Two directions: `--from` into a fresh store, and `--to`
// (kiln: a fresh cache; the daemon: a fresh chroot store via remote-store=). Interleaved rounds
// alternating which goes first, the median of the rounds' ratios. Needs root, Nix and sshd.
//   npx tsx bench/sshCopy.bench.ts [rounds=3] [leaves=180] [directions=from,to]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { buildBenchClosure, commandOutput } from './benchClosure.js';
import { startBenchKiln } from './benchKiln.js';
import { freePortForBench } from './freePort.js';
import { median } from './loadTools.js';
import { generateSshKeyPair } from '../services/organizations/index.js';

const rounds = Number(process.argv[2] ?? 3);
const leaves = Number(process.argv[3] ?? 180);
const directions = new Set((process.argv[4] ?? 'from,to').split(','));
const NIX_OPTIONS = ['--option', 'sandbox', 'false', '--option', 'build-users-group', '', '--option', 'substituters', ''];

function run(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const full = command === 'nix' ? ['--extra-experimental-features', 'nix-command', ...NIX_OPTIONS, ...args] : command.startsWith('nix') ? [...NIX_OPTIONS, ...args] : args;
  return commandOutput(command, full, env);
}

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-ssh-'));
const { root, closure } = await buildBenchClosure(work, leaves, NIX_OPTIONS);

// One client key, registered with kiln and authorized by sshd.
const clientKey = generateSshKeyPair('bench');
const identity = join(work, 'id_bench');
await writeFile(identity, clientKey.privateKey, { mode: 0o600 });

const bench = await startBenchKiln({ 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
await bench.createCache('bench');
const added = await fetch(`${bench.kiln.url}/api/v1/user/ssh-keys`, {
  method: 'POST', headers: { authorization: `Bearer ${bench.token}`, 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'bench', public_key: clientKey.publicKey }),
});
if (!added.ok) throw new Error(`registering the SSH key: ${added.status} ${await added.text()}`);

// OpenSSH's sshd with the same kind of host key, running nix-daemon --stdio for root.
const sshdPort = await freePortForBench();
const hostKey = generateSshKeyPair('bench-host');
await writeFile(join(work, 'host_key'), hostKey.privateKey, { mode: 0o600 });
await writeFile(join(work, 'authorized_keys'), `${clientKey.publicKey}\n`, { mode: 0o600 });
await writeFile(join(work, 'sshd_config'), [
  `Port ${sshdPort}`, 'ListenAddress 127.0.0.1', `HostKey ${join(work, 'host_key')}`, `AuthorizedKeysFile ${join(work, 'authorized_keys')}`,
  `PidFile ${join(work, 'sshd.pid')}`, 'PasswordAuthentication no', 'KbdInteractiveAuthentication no', 'PubkeyAuthentication yes',
  'StrictModes no', 'UsePAM no', 'PermitRootLogin yes', 'LogLevel ERROR', '',
].join('\n'));
mkdirSync('/run/sshd', { recursive: true });
const sshd = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(work, 'sshd_config')], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 500));

const kilnHost = ssh2.utils.parseKey(await readFile(join(bench.baseDir, 'ssh', 'ssh_host_ed25519_key')));
const kilnPublic = (Array.isArray(kilnHost) ? kilnHost[0] : kilnHost) as ssh2.ParsedKey;
const knownHosts = join(work, 'known_hosts');
await writeFile(knownHosts, [
  `[127.0.0.1]:${bench.kiln.sshPort} ${kilnPublic.type} ${kilnPublic.getPublicSSH().toString('base64')}`,
  `[127.0.0.1]:${sshdPort} ${hostKey.publicKey}`, '',
].join('\n'));
const sshOpts = (port: number) => ({
  NIX_SSHOPTS: ['-p', String(port), '-i', identity, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', '-F', '/dev/null'].join(' '),
});

/** Seconds to copy the closure from `url` into a fresh store. */
async function copyFrom(url: string, port: number, n: number): Promise<number> {
  const store = join(work, `store-${n}`);
  const started = process.hrtime.bigint();
  await run('nix', ['copy', '--no-check-sigs', '--from', url, '--to', store, root], sshOpts(port));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const copied = (await run('nix', ['path-info', '--store', store, '--all'])).trim().split('\n').length;
  if (copied !== closure.length) throw new Error(`${url}: the fresh store holds ${copied} paths, not ${closure.length}`);
  await rm(store, { recursive: true, force: true });
  return seconds;
}

/** Seconds to copy the closure to a fresh destination. */
async function copyTo(server: 'kiln' | 'daemon', n: number): Promise<number> {
  let url: string;
  if (server === 'kiln') {
    await bench.createCache(`to-${n}`);
    url = `ssh-ng://to-${n}@127.0.0.1`;
  } else {
    // The paths carry no signature the daemon trusts; kiln signs them itself and checks none.
    url = `ssh-ng://root@127.0.0.1?remote-store=${join(work, `dest-${n}`)}&remote-program=${encodeURIComponent('nix-daemon --option require-sigs false')}`;
  }
  const started = process.hrtime.bigint();
  await run('nix', ['copy', '--to', url, root], sshOpts(server === 'kiln' ? bench.kiln.sshPort! : sshdPort));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (server === 'daemon') await rm(join(work, `dest-${n}`), { recursive: true, force: true });
  return seconds;
}

const daemonUrl = 'ssh-ng://root@127.0.0.1';
const kilnUrl = 'ssh-ng://bench@127.0.0.1';
let n = 0;
// kiln's cache gets the closure over ssh-ng itself (and the warm-up copies of both directions).
await run('nix', ['copy', '--to', 'ssh-ng://bench@127.0.0.1', root], sshOpts(bench.kiln.sshPort!));
await copyFrom(daemonUrl, sshdPort, n++);
await copyFrom(kilnUrl, bench.kiln.sshPort!, n++);
const times = { fromDaemon: [] as number[], fromKiln: [] as number[], toDaemon: [] as number[], toKiln: [] as number[] };
for (let round = 0; round < rounds; round++) {
  const from = [['fromDaemon', daemonUrl, sshdPort], ['fromKiln', kilnUrl, bench.kiln.sshPort!]] as const;
  if (directions.has('from')) for (const [key, url, port] of round % 2 === 0 ? from : [...from].reverse()) times[key].push(await copyFrom(url, port, n++));
  const to = [['toDaemon', 'daemon'], ['toKiln', 'kiln']] as const;
  if (directions.has('to')) for (const [key, server] of round % 2 === 0 ? to : [...to].reverse()) times[key].push(await copyTo(server, n++));
  const last = (key: keyof typeof times) => times[key].at(-1)?.toFixed(2) ?? '-';
  console.error(`round ${round + 1}/${rounds} (load ${(await readFile('/proc/loadavg', 'utf8')).split(' ')[0]}): from daemon ${last('fromDaemon')} s, kiln ${last('fromKiln')} s; to daemon ${last('toDaemon')} s, kiln ${last('toKiln')} s`);
}
const ratio = (a: number[], b: number[]) => (a.length === 0 ? null : +median(a.map((x, i) => x / b[i]!)).toFixed(3));
console.log(JSON.stringify({
  bench: 'ssh-copy', paths: closure.length,
  from: { daemonSeconds: +median(times.fromDaemon).toFixed(3), kilnSeconds: +median(times.fromKiln).toFixed(3), ratio: ratio(times.fromKiln, times.fromDaemon) },
  to: { daemonSeconds: +median(times.toDaemon).toFixed(3), kilnSeconds: +median(times.toKiln).toFixed(3), ratio: ratio(times.toKiln, times.toDaemon) },
  all: times,
}));
sshd.kill('SIGTERM');
await bench.stop();
await rm(work, { recursive: true, force: true });
