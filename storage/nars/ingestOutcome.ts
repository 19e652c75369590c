// What an ingest ends with, apart from ingest.ts so heldCopy.ts can build one without importing it back.
export interface IngestOutcome {
  storePath: string;
  narHash: string;
  narSize: number;
  fileHash: string;
  fileSize: number;
  /** added: stored and signed now (replacing the cache's copy with another narinfo, if any); held: the cache already held this NAR with this narinfo, nothing was done */
  status: 'added' | 'held';
  /** the file of the copy this upload replaced, which this process must forget */
  replacedFileHash?: string;
}
