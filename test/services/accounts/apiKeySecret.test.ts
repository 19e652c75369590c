import t from 'tap';
import { generateApiKeySecret, hashApiKeySecret, looksLikeApiKey } from '../../../services/accounts/apiKeySecret.js';

t.test('SVC, 43 base62 characters, stored as SHA-256 hex', async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 50; i++) {
    const { secret, hash, prefix } = generateApiKeySecret();
    t.match(secret, /^SVC[0-9A-Za-z]{43}$/);
    t.equal(hash, hashApiKeySecret(secret));
    t.match(hash, /^[0-9a-f]{64}$/);
    t.equal(prefix, secret.slice(0, 8));
    t.ok(looksLikeApiKey(secret));
    seen.add(secret);
  }
  t.equal(seen.size, 50);
  t.notOk(looksLikeApiKey('eyJhbGciOi'));
});
