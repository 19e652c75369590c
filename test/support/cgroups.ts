// cgroup v2 for tests of build readings: where this machine mounts it, and a parent directory for
// a worker's build cgroups that is emptied (cgroup.kill) and removed at teardown.
import { existsSync, mkdirSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

/** cgroup v2 as this machine mounts it, or null: a test that needs it says so rather than pass without. */
export function cgroupRoot(): string | null {
  for (const root of ['/sys/fs/cgroup/unified', '/sys/fs/cgroup']) if (existsSync(join(root, 'cgroup.procs')) && existsSync(join(root, 'cgroup.controllers'))) return root;
  return null;
}

/**
 * A fresh parent cgroup under `root`; `remove` kills whatever still runs in its children (a build
 * whose worker was killed keeps running) and removes them and it.
 */
export function buildCgroupParent(root: string): { path: string; remove(): void } {
  const path = join(root, `kiln-test-${randomUUID().slice(0, 8)}`);
  mkdirSync(path);
  return {
    path,
    remove() {
      for (const child of readdirSync(path, { withFileTypes: true }).filter((e) => e.isDirectory())) {
        const dir = join(path, child.name);
        writeFileSync(join(dir, 'cgroup.kill'), '1');
        // the kernel empties a killed cgroup asynchronously: rmdir answers EBUSY until it has
        for (let tries = 0; ; tries++) {
          try {
            rmdirSync(dir);
            break;
          } catch (error) {
            if (tries > 1000) throw error;
            Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
          }
        }
      }
      rmdirSync(path);
    },
  };
}
