// `kiln serve` with worker.enable: a local `kiln worker` child connects over loopback in open
// mode with an id derived from the host name.
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { requireNix } from '../support/nixStore.js';
import { localWorkerId } from '../../cli/localWorker.js';
import { eventually } from '../support/eventually.js';

requireNix();

t.test('the local worker id is stable and UUID-shaped', async (t) => {
  t.equal(localWorkerId('host-a'), localWorkerId('host-a'));
  t.not(localWorkerId('host-a'), localWorkerId('host-b'));
  t.match(localWorkerId('host-a'), /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
});

t.test('worker.enable starts a local worker that connects', async (t) => {
  const kiln = await startTestKiln(t, { 'worker.enable': true, publicStats: true });
  const local = await eventually(async () => {
    const listed = await kiln.api<{ id: string; open: boolean }[]>('GET', '/workers');
    if (listed.error) throw new Error(String(listed.message));
    return listed.message.find((w) => w.id === localWorkerId());
  }, { timeout: 60_000, interval: 200, message: 'the local worker is listed' });
  t.equal(local.open, true);
});
