// A client that leaves mid-upload is not a fault of kiln's: one info line, no error, no stack.
import t from 'tap';
import pino from 'pino';
import { RouteTable, Router, startHttpServer } from '../../http/index.js';
import { RawConnection } from '../support/rawHttp.js';

t.test('a client that aborts a streamed upload is logged at info, without a stack', async (t) => {
  const lines: Record<string, unknown>[] = [];
  let wake = (): void => undefined;
  const log = pino({ level: 'debug' }, { write: (line: string) => (lines.push(JSON.parse(line) as Record<string, unknown>), wake()) });
  const table = new RouteTable<string>();
  let reading = (): void => undefined;
  const started = new Promise<void>((resolve) => (reading = resolve));
  new Router<string>(table).post('/upload', async (req) => {
    let n = 0;
    for await (const chunk of req.stream()) {
      n += chunk.byteLength;
      reading();
    }
    return n;
  }, { auth: 'none', body: 'stream', maxBody: 1 << 30 });
  const server = await startHttpServer<string>({
    listenAddr: '127.0.0.1', port: 0, maxRequestSize: 1024, trustedProxies: [], log, routes: table, anonymous: 'a',
    async authenticate() {
      return 'a';
    },
  });
  t.teardown(() => server.close(100));

  const c = await RawConnection.open(server.port);
  await c.write(Buffer.concat([Buffer.from(`POST /upload HTTP/1.1\r\nHost: kiln\r\nContent-Length: ${10 << 20}\r\n\r\n`), Buffer.alloc(64 << 10, 1)]));
  await started;
  c.destroy();
  while (!lines.some((l) => l['request'] !== undefined)) await new Promise<void>((resolve) => (wake = resolve));

  const [line] = lines.filter((l) => l['request'] !== undefined);
  t.match(line, { level: 30, msg: 'client went away before the answer', method: 'post', url: '/upload', reason: 'client aborted the request' });
  t.notMatch(JSON.stringify(line), /stack|"err"/, 'no stack, no error object');
  t.same(lines.filter((l) => Number(l['level']) >= 40), [], 'nothing at warn or error');
});
