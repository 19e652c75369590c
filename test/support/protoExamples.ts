// One valid example of every /proto message, for round trips and as the seed of the malformed corpus.
import { randomBytes } from 'node:crypto';
import type { Outgoing } from '../../protocol/index.js';

const drv = '/nix/store/lsfjb3hgbdh1w7s3jmdq7a1sk1x41vpg-wexp-app.drv';
const out = '/nix/store/h93pwik3ax2lgac7a1izrzniazswklyd-wexp-app';
const baseOut = '/nix/store/f7xnhfqv4ylf7nbf80mgy1001rqmagr3-wexp-base';
const narHash = 'sha256:1dd7bifbzl8rq9ndbvgzpdccfvdqlnmz0xd1r0a2zn7lsrzr7gwj';
const project = '0b7f6c8e-2f47-4a38-9d1d-3c6b1c2f9a10';
const info = { path: out, narHash, narSize: 336, references: [baseOut], deriver: drv, ca: null };

export const EXAMPLES: Outgoing[] = [
  {
    t: 'hello', workerId: '7d3c1a52-7b0e-4b8e-9d0e-6f1f5d2a9c33', software: 'kiln 0.1.0',
    capabilities: { eval: true, build: true, fetch: true, federate: false }, architectures: ['x86_64-linux'], systemFeatures: ['kvm', 'big-parallel'],
    maxConcurrentBuilds: 4, maxConcurrentEvals: 1, cpuCores: 2, cpuCoreScore: null, memoryBytes: 25_276_510_208, zone: null, open: false,
  },
  { t: 'challenge', nonce: randomBytes(32), projects: [project] },
  { t: 'auth', nonce: randomBytes(32), tokens: [{ project, token: randomBytes(48).toString('base64url') }] },
  {
    t: 'welcome', projects: [project], open: false, software: 'kiln 0.1.0',
    limits: { maxMessageBytes: 8 << 20, heartbeatIntervalSecs: 10, heartbeatTimeoutSecs: 120, narChunkBytes: 524288, narSendChunkTimeoutSecs: 30 },
  },
  { t: 'reject', code: 'bad_token', reason: 'none of the presented peer tokens is valid' },
  { t: 'heartbeat', seq: 7, load: { runningBuilds: 1, runningEvals: 0, load1: 0.42, memoryFreeBytes: 1 << 30, memoryTotalBytes: 4 << 30, storeFreeBytes: null } },
  {
    t: 'heartbeat', seq: 8, load: { runningBuilds: 1, runningEvals: 0, load1: 0.42, memoryFreeBytes: 1 << 30, memoryTotalBytes: 4 << 30, storeFreeBytes: null },
    builds: [{ jobId: 'job-1', wallSeconds: 12.5, cpuUserSeconds: 10, cpuSystemSeconds: 1, memoryBytes: 1 << 20, peakMemoryBytes: 1 << 21, ioReadBytes: null, ioWriteBytes: null, oomKills: null }],
  },
  { t: 'heartbeatAck', seq: 7 },
  { t: 'error', code: 'unknown_job', message: 'no running job x', jobId: 'x' },
  { t: 'evalJob', jobId: 'eval-1', project: '5b0d7a3e-8f7c-4d2a-9c1e-3f4a5b6c7d8e', repository: 'https://example.org/repo.git', commit: 'a'.repeat(40), attributes: 'packages.*.*', timeoutSecs: 0 },
  {
    t: 'evalJob', jobId: 'eval-2', project: '5b0d7a3e-8f7c-4d2a-9c1e-3f4a5b6c7d8e', repository: 'https://example.org/repo.git', commit: 'a'.repeat(40), attributes: 'packages.*.*', timeoutSecs: 0,
    inputCache: { url: 'https://kiln.example/eval-inputs/0b7c2d1e-4f5a-4b6c-8d9e-0f1a2b3c4d5e', token: 'Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA' },
  },
  {
    t: 'buildJob', jobId: 'b:1', drvPath: drv, substituters: [{ url: 'https://kiln.example/cache/main', publicKeys: ['main:AAAA'] }],
    targetCaches: ['main'], timeoutSecs: 14400, maxSilentSecs: 3600,
  },
  { t: 'pushJob', jobId: 'p1', paths: [drv], targetCaches: ['main'] },
  {
    t: 'changeJob', jobId: 'c1', project: '5b0d7a3e-8f7c-4d2a-9c1e-3f4a5b6c7d8e', repository: 'https://example.org/repo.git', commit: 'a'.repeat(40),
    command: ['nix', 'flake', 'update'], pushTo: 'https://example.org/acme/repo.git', pushAccess: { token: 'ghs_x', resolve: null },
    branch: 'kiln/default', author: { name: 'Kiln', email: null }, message: 'flake.lock: update',
  },
  { t: 'cancelJob', jobId: 'b:1', reason: 'evaluation aborted' },
  { t: 'evalCredit', jobId: 'eval-1', batches: 1 },
  { t: 'jobAccepted', jobId: 'b:1' },
  { t: 'jobRefused', jobId: 'b:2', refusal: 'busy', message: 'already running 4 builds' },
  {
    t: 'evalBatch', jobId: 'eval-1',
    derivations: [{
      drvPath: drv, name: 'wexp-app', outputs: { out }, inputDrvs: { '/nix/store/nq1x0z8j5yw6zihv7sw3kdwz1viykk2p-wexp-base.drv': ['out'] },
      inputSrcs: [], system: 'x86_64-linux', requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: 60, preferLocalBuild: false, fixedOutput: false,
    }],
    attributes: [{ path: ['packages', 'x86_64-linux', 'app'], drvPath: drv, outputs: { out } }],
    errors: [{ path: ['packages', 'x86_64-linux', 'bad'], message: 'error: boom' }],
  },
  { t: 'evalActivity', jobId: 'eval-1', kind: 'eval', message: 'evaluating attributes 1–2 of 2' },
  { t: 'evalResult', jobId: 'eval-1', commit: 'a'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 1, durationMs: 1234 },
  {
    t: 'evalResult', jobId: 'eval-2', commit: 'b'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1234,
    stats: { runs: 3, cpuSeconds: 0.25, thunks: 100, functionCalls: 10, primOpCalls: 5, values: 400, lookups: 7, allocatedBytes: 83536, peakHeapBytes: 402718720 },
  },
  { t: 'buildLog', jobId: 'b:1', seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 },
  { t: 'buildResult', jobId: 'b:1', drvPath: drv, outputs: [{ name: 'out', ...info }], alreadyValid: false, durationMs: 99, logBytes: 9, logDroppedBytes: 0 },
  {
    t: 'buildResult', jobId: 'b:2', drvPath: drv, outputs: [{ name: 'out', ...info }], alreadyValid: false, durationMs: 99, logBytes: 9, logDroppedBytes: 0,
    resources: { cpuUserSeconds: 1.5, cpuSystemSeconds: 0.25, peakMemoryBytes: null, ioReadBytes: 4096, ioWriteBytes: null, oomKills: null },
  },
  { t: 'pushResult', jobId: 'p1', paths: [{ path: drv, status: 'present' }] },
  { t: 'changeResult', jobId: 'c1', pushed: 'b'.repeat(40), durationMs: 812 },
  { t: 'changeResult', jobId: 'c2', pushed: null, durationMs: 90 },
  {
    t: 'jobFailed', jobId: 'b:3', failure: { class: 'FailedPermanent', reason: 'builder_failed', message: 'builder failed with exit code 3', exitCode: 3 },
    durationMs: 5, logBytes: 0, logDroppedBytes: 0,
  },
  { t: 'narPushStart', transferId: 0, jobId: 'b:1', info, targetCaches: ['main'] },
  { t: 'narCredit', transferId: 0, chunks: 4 },
  { t: 'narChunk', transferId: 0, seq: 0, data: randomBytes(4096) },
  { t: 'narPushEnd', transferId: 0, chunks: 1, narHash, narSize: 336 },
  { t: 'narPushAck', transferId: 0, status: 'stored' },
  { t: 'narAbort', transferId: 0, code: 'timeout', reason: 'no credit within 30 s' },
];
