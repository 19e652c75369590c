import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  decodeMessage, encodeMessage, parsePeersFile, serverHandshake, startServerHandshake, startWorkerHandshake, workerHandshakeReceive,
  workerHandshakeTimeout, type Message, type Outgoing, type PeerTokens, type ProtoLimits, type ServerHandshakeState, type ServerHandshakeStep,
  type WorkerHello,
} from '../../../protocol/index.js';

const limits: ProtoLimits = { maxMessageBytes: 8 << 20, heartbeatIntervalSecs: 10, heartbeatTimeoutSecs: 120, narChunkBytes: 524288, narSendChunkTimeoutSecs: 30 };
const projectA = '0b7f6c8e-2f47-4a38-9d1d-3c6b1c2f9a10';
const projectB = '5a1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0';
const tokenA = randomBytes(48).toString('base64url');
const tokenB = randomBytes(48).toString('base64url');
const hello: WorkerHello = {
  workerId: '7d3c1a52-7b0e-4b8e-9d0e-6f1f5d2a9c33', software: 'kiln test', capabilities: { eval: true, build: true, fetch: true, federate: false },
  architectures: ['x86_64-linux'], systemFeatures: [], maxConcurrentBuilds: 2, maxConcurrentEvals: 1, cpuCores: 2, cpuCoreScore: null,
  memoryBytes: 1 << 30, zone: null,
};

/** Sends through the real codec, so the machines see what a socket would deliver. */
const wire = (m: Outgoing): Message => {
  const decoded = decodeMessage(encodeMessage(m));
  if (!decoded.ok) throw new Error(`${decoded.field}: ${decoded.reason}`);
  return decoded.value;
};

const peers = (text: string): PeerTokens => {
  const parsed = parsePeersFile(text);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
};

interface ServerPolicy {
  projects: string[];
  valid: Record<string, string[]>;
  openModeProjects: string[] | null;
}

/** Runs both machines against each other until neither has anything to send. */
function converse(workerPeers: PeerTokens | null, policy: ServerPolicy) {
  let server: ServerHandshakeState = startServerHandshake(limits, 'kiln test server');
  const start = startWorkerHandshake(hello, workerPeers);
  let worker = start.state;
  let toServer = start.send.map(wire);
  let serverClose: ServerHandshakeStep['close'];
  const verifiedTokens: string[] = [];
  while (toServer.length > 0) {
    const toWorker: Message[] = [];
    for (const message of toServer) {
      let step = serverHandshake(server, { type: 'received', message });
      for (;;) {
        server = step.state;
        toWorker.push(...step.send.map(wire));
        serverClose ??= step.close;
        if (step.need?.kind === 'lookup') {
          step = serverHandshake(server, { type: 'challengeReady', projects: policy.projects, nonce: randomBytes(32), openModeProjects: policy.openModeProjects });
        } else if (step.need?.kind === 'verify') {
          verifiedTokens.push(...step.need.tokens.map((x) => x.token));
          step = serverHandshake(server, { type: 'verified', projects: step.need.tokens.filter((x) => policy.valid[x.project]?.includes(x.token)).map((x) => x.project) });
        } else break;
      }
    }
    toServer = [];
    for (const message of toWorker) {
      const step = workerHandshakeReceive(worker, message);
      worker = step.state;
      toServer.push(...step.send.map(wire));
    }
  }
  return { server, worker, serverClose, verifiedTokens };
}

t.test('a token per project: welcome with the projects whose token verified', async (t) => {
  const result = converse(peers(`${projectA}:${tokenA}\n${projectB}:${randomBytes(48).toString('base64url')}\n`), {
    projects: [projectA, projectB], valid: { [projectA]: [tokenA], [projectB]: [tokenB] }, openModeProjects: null,
  });
  t.equal(result.server.phase, 'established');
  t.equal(result.worker.phase, 'established');
  if (result.worker.phase === 'established') {
    t.same(result.worker.welcome.projects, [projectA]);
    t.equal(result.worker.welcome.open, false);
    t.same(result.worker.welcome.limits, limits);
  }
});

t.test('a * line answers every challenged project', async (t) => {
  const result = converse(peers(`*:${tokenB}\n`), { projects: [projectA, projectB], valid: { [projectB]: [tokenB] }, openModeProjects: null });
  t.equal(result.verifiedTokens.length, 2, 'one token offered per project');
  t.match(result.server, { phase: 'established', projects: [projectB] });
});

t.test('tokens for projects not challenged are never verified', async (t) => {
  const result = converse(peers(`${projectB}:${tokenB}\n`), { projects: [projectA], valid: { [projectB]: [tokenB] }, openModeProjects: [] });
  t.same(result.verifiedTokens, []);
  t.match(result.server, { phase: 'rejected', code: 'no_token' });
  t.match(result.worker, { phase: 'rejected', code: 'no_token' });
});

t.test('bad tokens: bad_token on both sides', async (t) => {
  const result = converse(peers(`${projectA}:${tokenB}\n`), { projects: [projectA], valid: { [projectA]: [tokenA] }, openModeProjects: null });
  t.match(result.server, { phase: 'rejected', code: 'bad_token' });
  t.match(result.worker, { phase: 'rejected', code: 'bad_token', reason: /none of the presented peer tokens/ });
  t.match(result.serverClose, { code: 'bad_token' });
});

t.test('open mode', async (t) => {
  t.match(converse(null, { projects: [], valid: {}, openModeProjects: [projectA] }).worker, { phase: 'established', welcome: { open: true, projects: [projectA] } });
  const refused = converse(null, { projects: [projectA], valid: {}, openModeProjects: null });
  t.match(refused.server, { phase: 'rejected', code: 'open_mode_refused' });
  t.match(refused.worker, { phase: 'rejected', code: 'open_mode_refused' });
});

t.test('the server machine refuses what does not fit the phase', async (t) => {
  const fresh = startServerHandshake(limits, 's');
  t.match(serverHandshake(fresh, { type: 'received', message: wire({ t: 'heartbeatAck', seq: 1 }) }), {
    state: { phase: 'rejected', code: 'unexpected_message' }, close: { code: 'unexpected_message', reason: /expected hello .* got heartbeatAck/ },
  });
  const looking = serverHandshake(fresh, { type: 'received', message: wire({ t: 'hello', ...hello, open: false }) }).state;
  const challenged = serverHandshake(looking, { type: 'challengeReady', projects: [projectA], nonce: randomBytes(32), openModeProjects: null }).state;
  t.match(serverHandshake(challenged, { type: 'received', message: wire({ t: 'auth', nonce: randomBytes(32), tokens: [] }) }).state, { phase: 'rejected', code: 'bad_nonce' });
  t.match(serverHandshake(challenged, { type: 'timeout', seconds: 30 }).state, { phase: 'rejected', code: 'handshake_timeout' });
  t.match(serverHandshake(challenged, { type: 'received', message: wire({ t: 'reject', code: 'shutting_down', reason: 'bye' }) }), { state: { phase: 'rejected', code: 'shutting_down' }, send: [] });
  t.throws(() => serverHandshake(fresh, { type: 'verified', projects: [] }), /does not fit the phase awaitingHello/);
  t.throws(() => serverHandshake(looking, { type: 'challengeReady', projects: [], nonce: Buffer.alloc(4), openModeProjects: null }), /32 random bytes/);
});

t.test('the worker machine refuses what does not fit the phase', async (t) => {
  const { state } = startWorkerHandshake(hello, null);
  t.match(workerHandshakeReceive(state, wire({ t: 'heartbeatAck', seq: 0 })), {
    state: { phase: 'rejected', code: 'unexpected_message' }, send: [{ t: 'reject', code: 'unexpected_message' }],
  });
  t.match(workerHandshakeTimeout(state, 30), { state: { phase: 'rejected', code: 'handshake_timeout', reason: 'no challenge within 30 s' } });
  const rejected = workerHandshakeReceive(state, wire({ t: 'reject', code: 'server_full', reason: 'full' }));
  t.match(rejected, { state: { phase: 'rejected', code: 'server_full' }, send: [], close: { code: 'server_full' } });
  t.same(workerHandshakeReceive(rejected.state, wire({ t: 'heartbeatAck', seq: 0 })).send, [], 'nothing after the end');
});
