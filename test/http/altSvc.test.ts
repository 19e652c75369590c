// useQuic: every answer advertises HTTP/3 on serveUrl's port (Alt-Svc, RFC 7838); off, none does
// (docs/http.md, "HTTP/3"). The servers run one after the other: the header is the process's.
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';

const ADVERTISED = 'h3=":8443"; ma=86400';

t.test('useQuic: the API, the web UI and the cache paths advertise h3 on the public port', async (t) => {
  const kiln = await startTestKiln(t, { useQuic: true, serveUrl: 'https://kiln.example:8443' });
  for (const path of ['/api/v1/health', '/', '/cache/none/nix-cache-info', '/api/v1/no-such-route']) {
    const res = await fetch(`http://127.0.0.1:${kiln.port}${path}`);
    await res.arrayBuffer();
    t.equal(res.headers.get('alt-svc'), ADVERTISED, `${path} (${res.status})`);
  }
  await kiln.stop();
});

t.test('off by default: no Alt-Svc', async (t) => {
  const kiln = await startTestKiln(t);
  const res = await fetch(`http://127.0.0.1:${kiln.port}/api/v1/health`);
  await res.arrayBuffer();
  t.equal(res.status, 200);
  t.equal(res.headers.get('alt-svc'), null);
});
