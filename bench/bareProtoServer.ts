// The baseline of the proto-workers bench, in a process of its own: a bare uWS app that speaks
// just enough /proto for the simulated workers (challenge, welcome, heartbeatAck) with plain
// msgpackr and no schema checks, no database, no bookkeeping. Reports its port to the parent.
import { randomBytes } from 'node:crypto';
import { Packr, Unpackr } from 'msgpackr';
import uWS from 'uWebSockets.js';
import { fullGc } from './childServer.js';
import { PROTOCOL_VERSION } from '../protocol/index.js';

const heartbeatIntervalSecs = Number(process.argv[2] ?? 10);
const packr = new Packr({ useRecords: false, moreTypes: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });
const limits = { maxMessageBytes: 8 << 20, heartbeatIntervalSecs, heartbeatTimeoutSecs: 120, narChunkBytes: 4 << 20, narSendChunkTimeoutSecs: 60 };

const app = uWS.App().ws('/proto', {
  compression: 0, idleTimeout: 0, sendPingsAutomatically: false, maxPayloadLength: 16 << 20,
  message: (ws, data) => {
    const message = unpackr.unpack(Buffer.from(data)) as { t: string; seq?: number };
    if (message.t === 'hello') ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'challenge', nonce: randomBytes(32), projects: [] }), true);
    else if (message.t === 'auth') ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'welcome', projects: [], open: true, software: 'bare', limits }), true);
    else if (message.t === 'heartbeat') ws.send(packr.pack({ v: PROTOCOL_VERSION, t: 'heartbeatAck', seq: message.seq }), true);
  },
});
app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('the bare /proto server could not listen');
  process.send!({ url: `ws://127.0.0.1:${uWS.us_socket_local_port(socket)}/proto` });
});
process.once('disconnect', () => process.exit(1));
process.on('message', (message) => {
  if (message === 'gc') {
    process.send!(fullGc());
  }
  if (message === 'stop') process.exit(0);
});
