// The baseline of the dispatch bench, in a process of its own: a bare uWS app that holds the same
// synthetic graph in memory (Kahn's algorithm, no database) and hands ready derivations to the
// simulated build workers as schema-valid buildJob frames. It starts when the parent says
// 'start'; what it measures is the floor set by the sockets, the codec and the fleet itself.
import { randomBytes } from 'node:crypto';
import { Packr, Unpackr } from 'msgpackr';
import uWS, { type WebSocket } from 'uWebSockets.js';
import { syntheticGraph } from './syntheticGraph.js';
import { PROTOCOL_VERSION } from '../protocol/index.js';

const [size, seed] = [Number(process.argv[2]), process.argv[3]!];
const graph = syntheticGraph(size, { seed });
const packr = new Packr({ useRecords: false, moreTypes: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });
const limits = { maxMessageBytes: 8 << 20, heartbeatIntervalSecs: 10, heartbeatTimeoutSecs: 120, narChunkBytes: 4 << 20, narSendChunkTimeoutSecs: 60 };

const index = new Map(graph.nodes.map((n, i) => [n.drvPath, i]));
const waiting = graph.nodes.map((n) => Object.keys(n.inputDrvs).length);
const dependents: number[][] = graph.nodes.map(() => []);
graph.nodes.forEach((n, i) => Object.keys(n.inputDrvs).forEach((input) => dependents[index.get(input)!]!.push(i)));
const ready: number[] = [];
let started = false;

interface Slot { free: number }
const workers: WebSocket<Slot>[] = [];

function dispatch(): void {
  if (!started) return;
  for (const ws of workers) {
    const data = ws.getUserData();
    while (data.free > 0 && ready.length > 0) {
      const node = graph.nodes[ready.pop()!]!;
      data.free--;
      ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'buildJob', jobId: `build:${index.get(node.drvPath)}:1`, drvPath: node.drvPath, substituters: [], targetCaches: ['main'], timeoutSecs: 0, maxSilentSecs: 0 }), true);
    }
  }
}

const app = uWS.App().ws<Slot>('/proto', {
  compression: 0, idleTimeout: 0, sendPingsAutomatically: false, maxPayloadLength: 16 << 20,
  upgrade: (res, req, context) => res.upgrade<Slot>({ free: 0 }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context),
  message: (ws, bytes) => {
    const m = unpackr.unpack(Buffer.from(bytes)) as { t: string; seq?: number; drvPath?: string; capabilities?: { build: boolean }; maxConcurrentBuilds?: number };
    if (m.t === 'hello') {
      if (m.capabilities?.build) {
        ws.getUserData().free = m.maxConcurrentBuilds ?? 1;
        workers.push(ws);
      }
      ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'challenge', nonce: randomBytes(32), projects: [] }), true);
    } else if (m.t === 'auth') ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'welcome', projects: [], open: true, software: 'bare', limits }), true);
    else if (m.t === 'heartbeat') ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'heartbeatAck', seq: m.seq }), true);
    else if (m.t === 'buildResult') {
      ws.getUserData().free++;
      for (const d of dependents[index.get(m.drvPath!)!]!) if (--waiting[d]! === 0) ready.push(d);
      dispatch();
    }
  },
});
app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('the bare dispatcher could not listen');
  process.send!({ url: `ws://127.0.0.1:${uWS.us_socket_local_port(socket)}/proto` });
});
process.once('disconnect', () => process.exit(1));
process.on('message', (message) => {
  if (message === 'start') {
    started = true;
    waiting.forEach((w, i) => w === 0 && ready.push(i));
    ready.reverse();
    dispatch();
    process.send!('started');
  } else if (message === 'stop') process.exit(0);
  else if (message === 'gc') process.send!('gc-done');
});
