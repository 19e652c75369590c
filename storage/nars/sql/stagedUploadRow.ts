// The row type of staged_uploads, shared by its queries.
export interface StagedUploadRow {
  cacheId: string;
  uploadKey: string;
  compression: string;
  bytesStaged: number;
  /** tells a fresh upload from an abandoned one under the same key (its compressed frames are its own) */
  createdAt: Date;
  updatedAt: Date;
}

export interface StagedUploadColumns {
  cache_id: string;
  upload_key: string;
  compression: string;
  bytes_staged: string;
  created_at: Date;
  updated_at: Date;
}

export const toStagedUpload = (row: StagedUploadColumns): StagedUploadRow => ({
  cacheId: row.cache_id,
  uploadKey: row.upload_key,
  compression: row.compression,
  bytesStaged: Number(row.bytes_staged),
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});
