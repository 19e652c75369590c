// `nix-store --dump` in process: a file, symlink or directory on disk as a NAR. This file walks
// the filesystem (read-only, names as raw bytes); protocol/nix writeNar turns the walk into bytes.
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { writeNar, type NarDumpOptions, type NarTreeNode } from '../protocol/index.js';

/** Streams the NAR of `path` (not followed if it is a symlink, as Nix does). */
export async function* dumpNar(path: string | Buffer, options: NarDumpOptions = {}): AsyncGenerator<Uint8Array> {
  yield* writeNar(await fileTreeNode(typeof path === 'string' ? Buffer.from(path) : path), options);
}

async function fileTreeNode(path: Buffer): Promise<NarTreeNode> {
  const st = await lstat(path);
  if (st.isSymbolicLink()) return { type: 'symlink', target: await readlink(path, { encoding: 'buffer' }) };
  if (st.isFile()) {
    // Nix marks a file executable when its owner may execute it (S_IXUSR).
    return { type: 'regular', executable: (st.mode & 0o100) !== 0, size: st.size, contents: (chunkBytes) => fileContents(path, st.size, chunkBytes) };
  }
  if (st.isDirectory()) {
    return {
      type: 'directory',
      names: () => readdir(path, { encoding: 'buffer' }),
      child: (name) => fileTreeNode(Buffer.concat([path, Buffer.from('/'), name])),
    };
  }
  throw new Error(`cannot dump ${path.toString()}: a NAR holds only regular files, directories and symlinks`);
}

/** Reads exactly `size` bytes, as Nix does: a file that grows is cut at `size`, one that shrinks meanwhile is an error. */
async function* fileContents(path: Buffer, size: number, chunkBytes: number): AsyncGenerator<Uint8Array> {
  const handle = await open(path, 'r');
  try {
    let done = 0;
    while (done < size) {
      const want = Math.min(chunkBytes, size - done);
      const buffer = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await handle.read(buffer, got, want - got, done + got);
        if (bytesRead === 0) throw new Error(`cannot dump ${path.toString()}: the file shrank from ${size} bytes while it was read`);
        got += bytesRead;
      }
      done += want;
      yield buffer;
    }
  } finally {
    await handle.close();
  }
}
