// Bulk deletes in bounded slices, so a retention pass never holds one long transaction or lock
// over a large table (retentionDays: sessions, worker connections, Git host delivery ids).

/** The instant before which records are past `retentionDays`; null when 0 keeps everything. */
export function retentionCutoff(retentionDays: number, now: Date): Date | null {
  return retentionDays > 0 ? new Date(now.getTime() - retentionDays * 86_400_000) : null;
}

/** Runs `deleteSlice(limit)` (one statement deleting at most `limit` rows, answering how many)
 *  until a slice comes back short; how many rows in all. */
export async function deleteInSlices(deleteSlice: (limit: number) => Promise<number>, limit = 5000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await deleteSlice(limit);
    deleted += n;
    if (n < limit) return deleted;
  }
}
