// outbound.allowedNetworks: empty by default (public addresses only), a comma-separated list in
// its environment variable, and a range that is not one is refused at start, naming the option.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { ConfigError, loadConfig } from '../../config/index.js';

t.test('default, environment, and bad ranges', async (t) => {
  t.same(loadConfig({ scope: 'server', env: {} }).values['outbound.allowedNetworks'], [], 'public addresses only by default');
  const fromEnv = loadConfig({ scope: 'server', env: { SERVICE_OUTBOUND_ALLOWED_NETWORKS: '10.20.0.0/16, fd00::/8,192.168.1.5' } });
  t.same(fromEnv.values['outbound.allowedNetworks'], ['10.20.0.0/16', 'fd00::/8', '192.168.1.5']);
  t.throws(() => loadConfig({ scope: 'server', env: { SERVICE_OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/33' } }), ConfigError);
  t.throws(() => loadConfig({ scope: 'server', env: { SERVICE_OUTBOUND_ALLOWED_NETWORKS: 'intranet' } }), { message: /^outbound\.allowedNetworks=.*SERVICE_OUTBOUND_ALLOWED_NETWORKS/ });
});

t.test('the quick-start configuration does not open the private side', async (t) => {
  const dev = JSON.parse(readFileSync(new URL('../../kiln.dev.json', import.meta.url), 'utf8')) as Record<string, unknown>;
  t.notOk('outbound' in dev, 'kiln.dev.json leaves outbound.allowedNetworks at its default');
});
