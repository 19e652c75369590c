// The SSH server's host key: ssh.hostKeyFile when set, else an ed25519 key kiln generates under
// baseDir on first start (mode 0600) and reuses afterwards, so clients' known_hosts stay valid.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateSshKeyPair } from '../organizations/index.js';

export async function loadHostKey(hostKeyFile: string | null, baseDir: string): Promise<Buffer> {
  const file = hostKeyFile ?? join(baseDir, 'ssh', 'ssh_host_ed25519_key');
  let key: Buffer;
  try {
    key = await readFile(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || hostKeyFile !== null) throw new Error(`ssh.hostKeyFile: cannot read ${file}: ${(e as Error).message}`, { cause: e });
    await mkdir(join(baseDir, 'ssh'), { recursive: true, mode: 0o700 });
    key = Buffer.from(generateSshKeyPair('kiln-host').privateKey);
    // 'wx': two processes starting at once do not overwrite each other's key.
    await writeFile(file, key, { mode: 0o600, flag: 'wx' }).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      key = await readFile(file);
    });
  }
  const { utils } = (await import('ssh2')).default;
  const parsed = utils.parseKey(key);
  if (parsed instanceof Error || (Array.isArray(parsed) ? parsed[0] : parsed)?.isPrivateKey() !== true) {
    throw new Error(`ssh.hostKeyFile: ${file} is not an unencrypted OpenSSH private key`);
  }
  return key;
}
