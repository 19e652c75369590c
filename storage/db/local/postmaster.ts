// postmaster.pid: the lock file a running PostgreSQL keeps in its data directory. A kiln that was
// SIGKILLed leaves its server running (pg_ctl detaches it), and the next start finds it here.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface PostmasterLock {
  pid: number;
  port: number;
}

export async function readPostmasterLock(dataDir: string): Promise<PostmasterLock | undefined> {
  let text: string;
  try {
    text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  // Line 1 is the pid, line 4 the port (PostgreSQL's LOCK_FILE_LINE_* layout).
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return { pid, port: Number(lines[3]) };
}

/** Whether a process with this pid is running and, where /proc tells, is a PostgreSQL server. */
export async function isPostgresProcess(pid: number): Promise<boolean> {
  if (!isAlive(pid)) return false;
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return process.platform !== 'linux'; // no /proc (macOS): trust the lock file
  }
  // "pid (comm) state …". A zombie (Z) has exited; it lingers where PID 1 is slow to reap
  // orphans (containers), and would make pg_ctl stop wait for a lock file nobody removes.
  const match = /^\d+ \((.*)\) (\S)/.exec(stat);
  return match?.[1] === 'postgres' && match[2] !== 'Z';
}

/** Whether the pid exists; EPERM means it does, under an account kiln may not signal. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error instanceof Error && 'code' in error && error.code === 'EPERM';
  }
}
