import t from 'tap';
import { remoteBuildArgs, remoteBuilderFailure } from '../../worker/remoteBuilders.js';

t.test('the build step builds here, or only on the machines of worker.build.builders', async (t) => {
  t.same(remoteBuildArgs(null), ['--max-jobs', '1']);
  t.same(remoteBuildArgs('ssh://root@box x86_64-linux /k 2 1 -'), ['--max-jobs', '0', '--builders', 'ssh://root@box x86_64-linux /k 2 1 -']);
});

t.test('a machine Nix could not use is a network failure, a changed host key says how to accept it', async (t) => {
  // What Nix 2.8 prints (level 0 messages) when the server shows another key than the pinned one.
  const changed = 'cannot build on \'ssh://root@127.0.0.1\': error: cannot connect to \'root@127.0.0.1\': @@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\nHost key verification failed.\nunable to start any build; remote machines may not have all required system features.';
  t.match(remoteBuilderFailure(changed), { class: 'FailedTransient', reason: 'network', message: /host key is not the one kiln pinned.*POST \/api\/v1\/servers\/\{org\}\/\{server\}\/check-connection/s });
  t.match(remoteBuilderFailure('cannot build on \'ssh://root@box\': error: cannot connect to \'root@box\': ssh: connect to host box port 22: Connection refused\r\nunable to start any build'),
    { reason: 'network', message: 'the build server ssh://root@box could not be used: cannot connect to \'root@box\': ssh: connect to host box port 22: Connection refused' });
  t.equal(remoteBuilderFailure('builder for \'/nix/store/x.drv\' failed with exit code 1'), undefined, 'the build\'s own failure is classified as any other');
});
