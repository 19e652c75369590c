// PostgreSQL's side of a bench's work: the CPU time of the backends serving one database (the
// server's pools, and autovacuum while it works there), read from /proc/<pid>/stat, so a figure
// per unit of work holds on a machine loaded by other databases' sessions. Same host only; a
// backend that appears during the window counts whole, one that exits during it is lost.
import { readFileSync } from 'node:fs';
import type { Sql } from 'postgres';

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** utime + stime of a process in ms; null once it is gone */
function cpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name (in parentheses, which may hold spaces)
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return null;
  }
}

async function backends(sql: Sql): Promise<number[]> {
  const rows = await sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`;
  return rows.map((r) => r.pid);
}

/** Starts a window; the returned function gives the backends' CPU ms since then. */
export async function pgBackendCpu(sql: Sql): Promise<() => Promise<number>> {
  const start = new Map<number, number>();
  for (const pid of await backends(sql)) start.set(pid, cpuMs(pid) ?? 0);
  return async () => {
    let total = 0;
    for (const pid of new Set([...start.keys(), ...(await backends(sql))])) {
      const now = cpuMs(pid);
      if (now !== null) total += now - (start.get(pid) ?? 0);
    }
    return total;
  };
}
