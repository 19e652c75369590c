import t from 'tap';
import { verifySignature } from '../../../../protocol/index.js';
import { signUp } from '../../../support/accounts.js';
import { startEventKiln, startReceiver } from '../../../support/events.js';

// POST …/webhooks/{id}/deliveries/{delivery}/redeliver: a finished delivery's event sent again at
// once, as a new delivery with its own id and the same signed body, to a real HTTP receiver.

interface Delivery {
  id: string;
  event_id: string;
  event: string;
  status: string;
  attempts: number;
}

t.test('redeliver sends the same body again under a new delivery id; refused while under way', async (t) => {
  const kiln = await startEventKiln(t);
  const receiver = await startReceiver(t);
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://git.example/web.git' } });
  const hook = await kiln.api<{ id: string; secret: string }>('PUT', '/projects/web/webhooks', { token: ada.token, body: { url: receiver.url } });
  const { id, secret } = hook.message;
  const base = `/projects/web/webhooks/${id}`;

  const ping = await kiln.api<Delivery>('POST', `${base}/test`, { token: ada.token });
  t.match(ping.message, { status: 'delivered', event: 'webhook.ping' });
  t.equal(receiver.requests.length, 1);

  const again = await kiln.api<Delivery>('POST', `${base}/deliveries/${ping.message.id}/redeliver`, { token: ada.token });
  t.equal(again.status, 200);
  t.match(again.message, { status: 'delivered', event: 'webhook.ping', event_id: ping.message.event_id, attempts: 1 });
  t.not(again.message.id, ping.message.id, 'a new delivery');
  t.equal(receiver.requests.length, 2, 'sent at once');
  const [first, second] = receiver.requests;
  t.equal(second!.body, first!.body, 'the same bytes: the same event, the same `at`');
  t.equal(second!.headers['x-service-delivery'], again.message.id, 'under the new delivery id');
  t.equal(second!.headers['x-service-attempt'], '1', 'a fresh series of attempts');
  t.ok(verifySignature(secret, second!.body, second!.headers['x-service-signature'] as string), 'signed');
  const history = await kiln.api<{ deliveries: Delivery[]; total: number }>('GET', `${base}/deliveries`, { token: ada.token });
  t.equal(history.message.total, 2, 'both are in the history');
  t.match(await kiln.api<Delivery>('GET', `${base}/deliveries/${ping.message.id}`, { token: ada.token }), { message: { status: 'delivered', attempts: 1 } }, 'the original is untouched');

  receiver.mode = 500;
  const failing = await kiln.api<Delivery>('POST', `${base}/test`, { token: ada.token });
  t.equal(failing.message.status, 'retrying');
  t.match(await kiln.api('POST', `${base}/deliveries/${failing.message.id}/redeliver`, { token: ada.token }), { status: 409, code: 'delivery_in_progress' });

  t.match(await kiln.api('POST', `${base}/deliveries/7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6/redeliver`, { token: ada.token }), { status: 404 });
  t.match(await kiln.api('POST', `${base}/deliveries/not-a-uuid/redeliver`, { token: ada.token }), { status: 404 });
  const other = await kiln.api<{ id: string }>('PUT', '/admin/webhooks', { token: ada.token, body: { url: receiver.url } });
  t.match(await kiln.api('POST', `/admin/webhooks/${other.message.id}/deliveries/${ping.message.id}/redeliver`, { token: ada.token }), { status: 404 }, 'another webhook\'s delivery is not found');
  t.match(await kiln.api('POST', `${base}/deliveries/${ping.message.id}/redeliver`, { token: eve.token }), { status: 404 }, 'a stranger learns nothing');

  await kiln.api('PATCH', base, { token: ada.token, body: { active: false } });
  t.match(await kiln.api('POST', `${base}/deliveries/${ping.message.id}/redeliver`, { token: ada.token }), { status: 409, code: 'webhook_disabled' });
  t.equal(receiver.requests.length, 3, 'nothing more was sent');
});
