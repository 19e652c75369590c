// A build server's system features as its `nix show-config` prints them (sshConnection.ts,
// probedFeatures): the server is another party, so its output is read as hostile: names a record
// would refuse are dropped, duplicates and more than 64 too, and no line is no answer.
import t from 'tap';
import { probedFeatures } from '../../../services/organizations/sshConnection.js';

t.test('the system-features line of nix show-config', async (t) => {
  t.same(probedFeatures('cores = 0\nsystem-features = nixos-test benchmark big-parallel kvm\nsystem = x86_64-linux\n'),
    ['benchmark', 'big-parallel', 'kvm', 'nixos-test'], 'its names, sorted');
  t.same(probedFeatures('system-features = \n'), [], 'an empty setting is no features');
  t.equal(probedFeatures('cores = 0\nsystem = x86_64-linux\n'), null, 'no line: no answer');
  t.equal(probedFeatures(''), null);
  t.equal(probedFeatures('extra-system-features = kvm\n'), null, 'another setting is not it');
  t.same(probedFeatures('system-features = kvm $(reboot) a;b ../x kvm ' + 'x'.repeat(65) + '\n'), ['kvm'],
    'names a server record refuses are dropped, duplicates once');
  const many = Array.from({ length: 100 }, (_, i) => `f${String(i).padStart(3, '0')}`).join(' ');
  t.equal(probedFeatures(`system-features = ${many}\n`)!.length, 64, 'at most 64');
});
